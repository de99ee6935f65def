import { matchesStream, matchesType, normalizeFilter, type EventFilter } from '../core/filter.js';
import type { ConsumerRecord } from './stateBackend.js';
import {
  firstKeyAfter,
  type EventKey,
  type MatchCount,
  type SubscriptionSource,
} from './subscriptionSource.js';

/**
 * Lag counts the matching events among at most this many positions after the cursor; a consumer
 * further behind counts every position beyond them too.
 */
export const EXACT_LAG_LIMIT = 10_000;

/** Queries of `lagsOf` at once (counts, and the age of the first position beyond a window). */
const QUERIES_AT_ONCE = 8;

/** Most positions one `scanKeys` read of `lagsOf` looks at. */
const KEYS_PER_READ = 10_000;

/**
 * How many times over the consumers' windows must cover a stretch of the log for `lagsOf` to read
 * its keys once instead of counting each consumer in its own query: a count in the store is several
 * times cheaper per position than reading the position's keys out (about 5 to 8 times on SQLite).
 */
const SHARED_READ_COVERAGE = 8;

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
 * reads keys (`scanKeys`) and the consumers' windows overlap enough, each position of a stretch of
 * windows is read once and every consumer's filter is matched against it here: a consumer with no
 * matching event there has its lag without a query of its own (lag 0 within the positions counted),
 * the others are counted one query each, as are the windows that overlap too little.
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
    const shared = source.scanKeys !== undefined && covered >= SHARED_READ_COVERAGE * length;
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

/** Reads the keys of a stretch of windows (sorted by `after`) once and tallies each window's matches. */
async function tallyStretch(source: SubscriptionSource, run: Window[]): Promise<void> {
  const end = Math.max(...run.map((w) => w.upTo));
  for (let pos = run[0]!.after; pos < end;) {
    const page = await source.scanKeys!(pos, Math.min(KEYS_PER_READ, end - pos));
    tally(page.keys, pos, page.through, run);
    if (page.through <= pos) break;
    pos = page.through;
  }
}

/** Marks each window with a key among positions (`from`, `through`] that matches its filter. */
function tally(keys: EventKey[], from: number, through: number, windows: Window[]): void {
  const streams = new DistinctStreams();
  const typeIds = new Map<string, number>();
  const types: string[] = [];
  const sid = new Int32Array(keys.length);
  const tid = new Int32Array(keys.length);
  for (let i = 0; i < keys.length; i++) {
    const [, stream, type, hash] = keys[i]!;
    let t = typeIds.get(type);
    if (t === undefined) {
      t = types.push(type) - 1;
      typeIds.set(type, t);
    }
    sid[i] = streams.id(stream, hash);
    tid[i] = t;
  }
  streams.sort();
  for (const w of windows) {
    const lo = Math.max(w.after, from);
    const hi = Math.min(w.upTo, through);
    if (w.matched || lo >= hi) continue;
    // Each distinct type and stream is matched once per window, not once per event.
    const typeOk = Uint8Array.from(types, (t) => (matchesType(w.filter, t) ? 1 : 0));
    const streamOk = typeOk.includes(1) ? streams.matching(w.filter) : null;
    if (!streamOk) continue;
    const stop = firstKeyAfter(keys, hi);
    for (let i = firstKeyAfter(keys, lo); i < stop && !w.matched; i++) {
      w.matched = typeOk[tid[i]!] === 1 && streamOk.has(sid[i]!);
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
