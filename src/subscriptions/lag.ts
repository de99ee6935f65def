import { matchesStream, matchesType, normalizeFilter, type EventFilter } from '../core/filter.js';
import type { ConsumerRecord } from './stateBackend.js';
import type { KeyGroup, MatchCount, SubscriptionSource } from './subscriptionSource.js';

/**
 * Lag counts the matching events among at most this many positions after the cursor; a consumer
 * further behind counts every position beyond them too.
 */
export const EXACT_LAG_LIMIT = 10_000;

/** Queries of `lagsOf` at once (counts, and the age of the first position beyond a window). */
const QUERIES_AT_ONCE = 8;

/** Most positions one `groupKeys` read of `lagsOf` looks at. */
const POSITIONS_PER_READ = 10_000;

/**
 * How many times over the consumers' windows must cover a stretch of the log for `lagsOf` to read
 * its groups once instead of counting each consumer in its own query: a count in the store is
 * several times cheaper per position than grouping the positions' keys and reading the groups out.
 */
const SHARED_READ_COVERAGE = 4;

/** A consumer's lag, or why it could not be computed. */
export type Lag = { lag: number; lagSeconds: number } | { error: unknown };

/** Matching events after the cursor, counted exactly up to `EXACT_LAG_LIMIT` behind, and the oldest one's age. */
export async function lagOf(
  source: SubscriptionSource,
  state: ConsumerRecord,
  head: number,
  now: number,
): Promise<{ lag: number; lagSeconds: number }> {
  // A filter stored before the filter limits is refused here as it would be on subscribe, on every store.
  const filter = normalizeFilter(state.filter);
  if (head <= state.position) return { lag: 0, lagSeconds: 0 };
  const upTo = Math.min(head, state.position + EXACT_LAG_LIMIT);
  const counted = await countMatching(source, state.position, upTo, filter);
  return lagFrom(source, counted, upTo, head, now);
}

/** Lag from the count of the positions up to `upTo`, and the age of the oldest event it counts. */
async function lagFrom(
  source: SubscriptionSource,
  counted: MatchCount,
  upTo: number,
  head: number,
  now: number,
): Promise<{ lag: number; lagSeconds: number }> {
  const lag = counted.count + (head - upTo);
  // Beyond the positions counted, the first one not counted is as old as a match there can be.
  const oldest = counted.oldest ?? (upTo < head ? await recordedAfter(source, upTo) : null);
  return { lag, lagSeconds: oldest === null ? 0 : Math.max(0, (now - Date.parse(oldest)) / 1000) };
}

/** One consumer's window of `lagsOf`: the positions (`after`, `upTo`] its lag counts. */
interface Window {
  name: string;
  filter: EventFilter;
  after: number;
  upTo: number;
  /** Whether an event of the window matches the filter, once tallied. */
  matched: boolean;
}

/**
 * The lag of every consumer in `states` (by name), the same as `lagOf` gives each. Where the store
 * groups keys (`groupKeys`) and the consumers' windows overlap enough, the distinct stream and type
 * pairs of a stretch of windows are read once and every consumer's filter is matched against them
 * here: a consumer with no matching event there has its lag without a query of its own (lag 0 within
 * the positions counted), the others are counted one query each, as are the windows that overlap
 * too little.
 */
export async function lagsOf(
  source: SubscriptionSource,
  states: readonly ConsumerRecord[],
  head: number,
  now: number,
): Promise<Map<string, Lag>> {
  const out = new Map<string, Lag>();
  const windows: Window[] = [];
  for (const s of states) {
    try {
      const filter = normalizeFilter(s.filter);
      if (head <= s.position) {
        out.set(s.name, { lag: 0, lagSeconds: 0 });
        continue;
      }
      const upTo = Math.min(head, s.position + EXACT_LAG_LIMIT);
      windows.push({ name: s.name, filter, after: s.position, upTo, matched: false });
    } catch (err) {
      out.set(s.name, { error: err });
    }
  }
  windows.sort((a, b) => a.after - b.after);
  // Consumers with nothing matching among positions read once need no count of their own.
  const counted: Window[] = [];
  const none: Window[] = [];
  for (const run of stretches(windows)) {
    const length = Math.max(...run.map((w) => w.upTo)) - run[0]!.after;
    const covered = run.reduce((n, w) => n + (w.upTo - w.after), 0);
    const shared = source.groupKeys !== undefined && covered >= SHARED_READ_COVERAGE * length;
    if (shared) await tallyStretch(source, run);
    for (const w of run) (shared && !w.matched ? none : counted).push(w);
  }
  const jobs = [...none.map((w) => ({ w, count: false })), ...counted.map((w) => ({ w, count: true }))];
  // A few at a time: on a store whose reads are round trips they overlap.
  for (let i = 0; i < jobs.length; i += QUERIES_AT_ONCE) {
    await Promise.all(
      jobs.slice(i, i + QUERIES_AT_ONCE).map(async ({ w, count }) => {
        try {
          const c = count
            ? await countMatching(source, w.after, w.upTo, w.filter)
            : { count: 0, oldest: null };
          out.set(w.name, await lagFrom(source, c, w.upTo, head, now));
        } catch (err) {
          out.set(w.name, { error: err });
        }
      }),
    );
  }
  return out;
}

/** Windows sorted by `after`, gathered into stretches of the log where they overlap or touch. */
function* stretches(windows: Window[]): Generator<Window[]> {
  let run: Window[] = [];
  let end = 0;
  for (const w of windows) {
    if (run.length > 0 && w.after > end) {
      yield run;
      run = [];
    }
    end = run.length === 0 ? w.upTo : Math.max(end, w.upTo);
    run.push(w);
  }
  if (run.length > 0) yield run;
}

/** Reads the groups of a stretch of windows (sorted by `after`) and marks the windows with a match. */
async function tallyStretch(source: SubscriptionSource, run: Window[]): Promise<void> {
  const end = Math.max(...run.map((w) => w.upTo));
  for (let from = run[0]!.after; from < end; from += POSITIONS_PER_READ) {
    const through = Math.min(end, from + POSITIONS_PER_READ);
    tally(await source.groupKeys!(from, through), from, through, run);
  }
}

/**
 * Marks each window that may have an event matching its filter among positions (`from`, `through`]:
 * one of its groups matches and has a position in the window, or spans it (its first position before
 * the window, its last after). Those are counted exactly afterwards.
 */
function tally(groups: KeyGroup[], from: number, through: number, windows: Window[]): void {
  const streams = new DistinctStreams();
  const typeIds = new Map<string, number>();
  const types: string[] = [];
  /** The groups of each stream id, each with its type id. */
  const byStream: [KeyGroup, number][][] = [];
  for (const g of groups) {
    const [stream, type, hash] = g;
    let t = typeIds.get(type);
    if (t === undefined) {
      t = types.push(type) - 1;
      typeIds.set(type, t);
    }
    (byStream[streams.id(stream, hash)] ??= []).push([g, t]);
  }
  streams.sort();
  for (const w of windows) {
    const lo = Math.max(w.after, from);
    const hi = Math.min(w.upTo, through);
    if (w.matched || lo >= hi) continue;
    // Each distinct type and stream is matched once per window, not once per event.
    const typeOk = Uint8Array.from(types, (t) => (matchesType(w.filter, t) ? 1 : 0));
    const streamOk = typeOk.includes(1) ? streams.matching(w.filter) : null;
    for (const id of streamOk ?? []) {
      w.matched = byStream[id]!.some(([g, t]) => typeOk[t] === 1 && g[4] > lo && g[3] <= hi);
      if (w.matched) break;
    }
  }
}

/**
 * The distinct streams of a page of keys, sorted once, so that a filter's prefixes and categories
 * find their streams by binary search instead of testing every stream.
 */
class DistinctStreams {
  private readonly ids = new Map<string, number>();
  private readonly names: string[] = [];
  private readonly hashes: number[] = [];
  /** Stream ids in name order. */
  private order: number[] = [];

  id(stream: string, hash: number): number {
    let id = this.ids.get(stream);
    if (id === undefined) {
      id = this.names.push(stream) - 1;
      this.hashes.push(hash);
      this.ids.set(stream, id);
    }
    return id;
  }

  sort(): void {
    const names = this.names;
    this.order = names
      .map((_, i) => i)
      .sort((a, b) => (names[a]! < names[b]! ? -1 : names[a]! > names[b]! ? 1 : 0));
  }

  /** The ids of the streams `filter` matches (its types aside); null when none. */
  matching(filter: EventFilter): Set<number> | null {
    const out = new Set<number>();
    const check = (id: number): void => {
      if (matchesStream(filter, this.names[id]!, this.hashes[id])) out.add(id);
    };
    const prefixes = [
      ...(filter.streamPrefixes ?? []),
      ...(filter.categories ?? []).flatMap((c) => [c, `${c}-`]),
    ];
    if (prefixes.length === 0) this.names.forEach((_, id) => check(id));
    // A category matches its name and the streams starting with it and `-`: both are prefix ranges.
    for (const p of prefixes) {
      for (
        let i = this.lowerBound(p);
        i < this.order.length && this.names[this.order[i]!]!.startsWith(p);
        i++
      )
        check(this.order[i]!);
    }
    return out.size > 0 ? out : null;
  }

  /** The first index in name order whose name is not below `name`. */
  private lowerBound(name: string): number {
    let lo = 0;
    let hi = this.order.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.names[this.order[mid]!]! < name) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/** The source's `countMatching`, or the same collected from `readAll`. */
async function countMatching(
  source: SubscriptionSource,
  after: number,
  upTo: number,
  filter: EventFilter,
): Promise<MatchCount> {
  if (source.countMatching) return source.countMatching(after, upTo, filter);
  let count = 0;
  let oldest: string | null = null;
  for await (const e of source.readAll({ after, filter })) {
    if (e.position > upTo) break;
    oldest ??= e.recordedAt;
    count++;
  }
  return { count, oldest };
}

/** When the event right after `position` was recorded (null past the head). */
async function recordedAfter(source: SubscriptionSource, position: number): Promise<string | null> {
  for await (const e of source.readAll({ after: position, limit: 1 })) return e.recordedAt;
  return null;
}
