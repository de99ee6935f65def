import { streamCategory } from '../core/event.js';
import { matchesStream, matchesType, type EventFilter } from '../core/filter.js';
import { firstKeyAfter, type EventKeys, type KeyPage, type StreamsAnswer } from './subscriptionSource.js';

/** Keys the tail holds at least (at most twice as many); a subscription further behind reads for itself. */
const TAIL_KEYS = 20_000;

/**
 * Most prefixes and categories in the one query that asks whether any resting subscription's streams
 * were appended to (`firstStreamMatch`); with more the tail reads the keys.
 */
const MAX_STREAM_NAMES = 200;

/** Keys per block: a look skips a whole block whose summary rules its filter out. */
export const TAIL_BLOCK = 256;

/** What a block of keys holds: its distinct types, categories and streams (sorted). */
interface BlockSummary {
  /** The block's keys it summarises: `TAIL_BLOCK` once the block is full. */
  size: number;
  types: Set<string>;
  categories: Set<string>;
  streams: string[];
}

/** What the tail says about the positions after a subscription's read position. */
export interface TailLook {
  /**
   * Every position up to here was looked at (at most the asked number after the read position, but
   * the head when the source found no stream the filter wants: see `streamsMayMatch`).
   */
  through: number;
  /** The head the read of the keys saw. */
  head: number;
  /** The first position up to `through` whose event matches the filter; null when none does. */
  first: number | null;
}

/** A subscription resting in the tail until it shows an event for its filter (see `SharedTail.rest`). */
interface Rester {
  /** Every position up to here was looked at for it. */
  after: number;
  readonly filter: EventFilter;
  readonly maxScan: number;
  readonly onThrough: (through: number) => void;
  readonly wake: () => void;
}

/** What `SharedTail.rest` returns: `done` resolves when the rest ends; `cancel` ends it now. */
export interface TailRest {
  done: Promise<void>;
  cancel(): void;
}

/**
 * The keys (stream, type, stream hash) of the log's last positions, read once for all the idle
 * subscriptions of a service: a subscription whose last read found nothing for its filter asks here
 * first, and reads events only from the first position that matches. So a hundred idle narrow
 * subscriptions cost one read of what was appended, not a hundred.
 *
 * Fresh enough for an asker: the keys were read at most `freshMs` before it asked, and up to every
 * head this process committed before it asked (`appended`), so a look misses nothing an own read
 * would have found but commits of other processes in those last milliseconds; those are found by the
 * next look, as positions past `through` are never reported as looked at.
 */
export class SharedTail {
  private keys: EventKeys = { positions: [], streams: [], types: [], hashes: [] };
  /**
   * Summaries of the blocks of `keys` (block `b`: keys `b * TAIL_BLOCK` to `(b + 1) * TAIL_BLOCK - 1`),
   * made by the first look that reaches a block. Keys are only ever added after the last, and trimmed
   * a whole number of blocks at a time, so a full block's summary stays true.
   */
  private blocks: (BlockSummary | undefined)[] = [];
  /** The keys hold every event at positions in (`base`, `through`]; none yet while `through` < 0. */
  private base = 0;
  private through = -1;
  private head = 0;
  /** The highest head committed by this process, as `onAppend` reports it. */
  private known = 0;
  /** When the read of the last keys started. */
  private readAt = 0;
  private reading: Promise<void> | null = null;
  /** Filters (each subscription's own object) some of whose streams were found (`streamsMayMatch`). */
  private readonly streamsFound = new WeakSet<EventFilter>();
  /** The subscriptions resting here, and the timer of the next polling tick that looks for them. */
  private readonly resters = new Set<Rester>();
  private tick: NodeJS.Timeout | null = null;
  /** A tick's looks are under way (the next tick is scheduled when they are done). */
  private looking = false;

  /**
   * @param tailKeys Keys held at least (at most twice as many, plus a block); tests make it small.
   * @param streamsMayMatch the source's `streamsMayMatch`, when it has one
   * @param firstStreamMatch the source's `firstStreamMatch`, when it has one
   */
  constructor(
    private readonly scanKeys: (after: number, maxScan: number) => Promise<KeyPage>,
    private readonly freshMs: number,
    private readonly tailKeys = TAIL_KEYS,
    private readonly streamsMayMatch?: (filter: EventFilter) => Promise<StreamsAnswer>,
    private readonly firstStreamMatch?: (
      after: number,
      prefixes: readonly string[],
      categories: readonly string[],
    ) => Promise<{ head: number; first: number | null }>,
  ) {}

  /** A commit of this process reached `head`. */
  appended(head: number): void {
    if (head > this.known) this.known = head;
  }

  /**
   * The first event after `after`, among at most `maxScan` positions, that matches `filter`, from keys
   * fresh enough (read again if not); null when the tail does not hold `after` (a subscription behind
   * it reads for itself).
   */
  async look(after: number, filter: EventFilter, maxScan: number): Promise<TailLook | null> {
    if (
      this.streamsMayMatch &&
      (filter.categories?.length || filter.streamPrefixes?.length) &&
      !this.streamsFound.has(filter)
    ) {
      // No stored stream is one the filter wants: nothing up to the head read first matches.
      const streams = await this.streamsMayMatch(filter);
      if (!streams.may) return { through: Math.max(after, streams.head), head: streams.head, first: null };
      // Events are never removed: once the filter's streams exist, its looks read the keys.
      this.streamsFound.add(filter);
    }
    const asked = Date.now();
    const known = this.known;
    while (!this.fresh(after, asked, known)) {
      if (this.through >= 0 && after < this.base) return null;
      const reading = (this.reading ??= this.extend(after).finally(() => (this.reading = null)));
      await reading;
      // A read that started before this look asked cannot answer it: the next one will.
    }
    const end = Math.min(this.through, after + maxScan);
    const { positions, streams, types, hashes } = this.keys;
    const start = firstKeyAfter(positions, after);
    for (let i = start; i < positions.length;) {
      const position = positions[i]!;
      if (position > end) break;
      // At the first key looked at in a block: skip the rest of the block if its summary says that
      // nothing in the whole block can match.
      if ((i === start || i % TAIL_BLOCK === 0) && !this.mayMatch(Math.floor(i / TAIL_BLOCK), filter)) {
        i = (Math.floor(i / TAIL_BLOCK) + 1) * TAIL_BLOCK;
        continue;
      }
      if (matchesType(filter, types[i]!) && matchesStream(filter, streams[i]!, hashes[i]))
        return { through: end, head: this.head, first: position };
      i++;
    }
    return { through: end, head: this.head, first: null };
  }

  /**
   * Rests a subscription whose reads found only events its filter leaves out, until the tail shows
   * one it wants. At each tick of the polling interval (the multiples of `pollMs`, as the
   * subscriptions' own polls) the tail looks after each resting subscription's position as its own
   * `look` would, all of them on one read of the keys, and tells it through `onThrough` how far
   * nothing matched; so a resting subscription costs a look per tick, not a wake-up of its own.
   * `done` resolves when a look finds a match, stops short of the head it read, fails, or cannot
   * answer (the tail no longer holds the position); the subscription then reads for itself.
   */
  rest(
    after: number,
    filter: EventFilter,
    maxScan: number,
    pollMs: number,
    onThrough: (through: number) => void,
  ): TailRest {
    let wake!: () => void;
    const done = new Promise<void>((resolve) => (wake = resolve));
    const rester: Rester = { after, filter, maxScan, onThrough, wake };
    this.resters.add(rester);
    this.scheduleTick(pollMs);
    return {
      done,
      cancel: () => {
        this.resters.delete(rester);
        wake();
        if (this.resters.size === 0 && this.tick) {
          clearTimeout(this.tick);
          this.tick = null;
        }
      },
    };
  }

  /**
   * With `firstStreamMatch`, when every resting subscription's filter names streams (categories or
   * prefixes): one query for the first position after the earliest of them whose stream is one of
   * theirs. None up to the head: every one of them is told so, and true (no keys are read); else false,
   * and each looks as usual. Where `streamsMayMatch` can tell from the streams' index that no stored
   * stream is one of theirs, that answers instead, without reading the events appended since (on
   * PostgreSQL the query costs a fraction of a µs per new event: see its `firstStreamMatch`).
   */
  private async noneForResters(): Promise<boolean> {
    if (!this.firstStreamMatch || this.resters.size === 0) return false;
    const resters = [...this.resters];
    const prefixes = new Set<string>();
    const categories = new Set<string>();
    let after = Infinity;
    for (const r of resters) {
      const { categories: cats = [], streamPrefixes = [] } = r.filter;
      if (cats.length === 0 && streamPrefixes.length === 0) return false;
      for (const c of cats) categories.add(c);
      for (const p of streamPrefixes) prefixes.add(p);
      after = Math.min(after, r.after);
    }
    if (prefixes.size + categories.size > MAX_STREAM_NAMES) return false;
    let answer: { head: number; first: number | null };
    try {
      const streams = this.streamsMayMatch
        ? await this.streamsMayMatch({ categories: [...categories], streamPrefixes: [...prefixes] })
        : null;
      answer =
        streams?.may === false
          ? { head: streams.head, first: null }
          : await this.firstStreamMatch(after, [...prefixes], [...categories]);
    } catch {
      // The looks read the keys instead (and meet the failure, if it lasts).
      return false;
    }
    if (answer.first !== null) return false;
    // Only those asked about: one that came to rest meanwhile waits for the next tick.
    for (const r of resters) {
      if (!this.resters.has(r) || answer.head <= r.after) continue;
      r.after = answer.head;
      r.onThrough(answer.head);
    }
    return true;
  }

  private scheduleTick(pollMs: number): void {
    if (this.tick || this.looking || this.resters.size === 0) return;
    this.tick = setTimeout(
      () => {
        this.tick = null;
        void this.lookForResters(pollMs);
      },
      pollMs - (Date.now() % pollMs),
    );
  }

  /** A polling tick: a look for every resting subscription, then the next tick while any rests. */
  private async lookForResters(pollMs: number): Promise<void> {
    this.looking = true;
    try {
      if (await this.noneForResters()) return;
      for (const r of [...this.resters]) {
        let look: TailLook | null = null;
        try {
          look = await this.look(r.after, r.filter, r.maxScan);
        } catch {
          // Woken, its own read meets the failure.
        }
        if (!this.resters.has(r)) continue;
        if (look === null || look.first !== null || look.through < look.head) {
          this.resters.delete(r);
          r.wake();
        } else if (look.through > r.after) {
          r.after = look.through;
          r.onThrough(look.through);
        }
      }
    } finally {
      this.looking = false;
      this.scheduleTick(pollMs);
    }
  }

  /**
   * False when no key of block `b` (as many of its keys as are held) can match `filter`: none of
   * its types is in the block, or none of its categories or stream prefixes (when it has some). A
   * partition is not summarised: the block's keys are then looked at one by one.
   */
  private mayMatch(b: number, filter: EventFilter): boolean {
    const held = Math.min(TAIL_BLOCK, this.keys.positions.length - b * TAIL_BLOCK);
    let block = this.blocks[b];
    // The last block grows as keys are read: its summary is made again when it holds more.
    if (block?.size !== held) block = this.blocks[b] = summarise(this.keys, b * TAIL_BLOCK, held);
    const { types, categories, streamPrefixes } = filter;
    if (types !== undefined && types.length > 0 && !types.some((t) => block.types.has(t))) return false;
    const hasCat = categories !== undefined && categories.length > 0;
    const hasPre = streamPrefixes !== undefined && streamPrefixes.length > 0;
    if (!hasCat && !hasPre) return true;
    if (hasCat && categories.some((c) => block.categories.has(c))) return true;
    return hasPre && streamPrefixes.some((p) => hasPrefix(block.streams, p));
  }

  private fresh(after: number, asked: number, known: number): boolean {
    return (
      this.through >= after &&
      after >= this.base &&
      this.readAt >= asked - this.freshMs &&
      this.head >= known &&
      // At the end of the keys while the log goes on: read on.
      (this.through > after || this.through >= this.head)
    );
  }

  /** Reads the keys after those held, or after `after` when they do not reach it. */
  private async extend(after: number): Promise<void> {
    const started = Date.now();
    const from = this.through >= 0 && after <= this.through ? this.through : after;
    const page = await this.scanKeys(from, this.tailKeys);
    if (from !== this.through) {
      const { positions, streams, types, hashes } = page;
      this.keys = { positions, streams, types, hashes };
      this.blocks = [];
      this.base = from;
    } else {
      const keys = this.keys;
      for (let i = 0; i < page.positions.length; i++) {
        keys.positions.push(page.positions[i]!);
        keys.streams.push(page.streams[i]!);
        keys.types.push(page.types[i]!);
        keys.hashes.push(page.hashes[i]!);
      }
      // Trimmed to the last `tailKeys` or more once twice as many: a copy now and then, not at every
      // read; whole blocks, so that the summaries kept still describe their keys.
      const excess = keys.positions.length - this.tailKeys;
      if (excess >= this.tailKeys) {
        const drop = excess - (excess % TAIL_BLOCK);
        this.base = keys.positions[drop - 1]!;
        this.keys = {
          positions: keys.positions.slice(drop),
          streams: keys.streams.slice(drop),
          types: keys.types.slice(drop),
          hashes: keys.hashes.slice(drop),
        };
        this.blocks = this.blocks.slice(drop / TAIL_BLOCK);
      }
    }
    this.through = page.through;
    this.head = page.head;
    this.readAt = started;
  }
}

/** The summary of the `size` keys from index `from`. */
function summarise(keys: EventKeys, from: number, size: number): BlockSummary {
  const types = new Set<string>();
  const streams = new Set<string>();
  for (let i = from; i < from + size; i++) {
    streams.add(keys.streams[i]!);
    types.add(keys.types[i]!);
  }
  const sorted = [...streams].sort();
  return { size, types, categories: new Set(sorted.map(streamCategory)), streams: sorted };
}

/** Whether a stream of `sorted` (ascending, in code-unit order) starts with `prefix`. */
function hasPrefix(sorted: readonly string[], prefix: string): boolean {
  // Every string starting with `prefix` sorts at or after it, and those come first there.
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < prefix) lo = mid + 1;
    else hi = mid;
  }
  return lo < sorted.length && sorted[lo]!.startsWith(prefix);
}
