import { streamCategory } from '../core/event.js';
import { matchesStream, matchesType, type EventFilter } from '../core/filter.js';
import { firstKeyAfter, type EventKey, type KeyPage } from './subscriptionSource.js';

/** Keys the tail holds at least (at most twice as many); a subscription further behind reads for itself. */
const TAIL_KEYS = 20_000;

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
  /** Every position up to here was looked at (at most the asked number after the read position). */
  through: number;
  /** The head the read of the keys saw. */
  head: number;
  /** The first position up to `through` whose event matches the filter; null when none does. */
  first: number | null;
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
  private keys: EventKey[] = [];
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

  /**
   * @param tailKeys Keys held at least (at most twice as many, plus a block); tests make it small.
   */
  constructor(
    private readonly scanKeys: (after: number, maxScan: number) => Promise<KeyPage>,
    private readonly freshMs: number,
    private readonly tailKeys = TAIL_KEYS,
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
    const asked = Date.now();
    const known = this.known;
    while (!this.fresh(after, asked, known)) {
      if (this.through >= 0 && after < this.base) return null;
      const reading = (this.reading ??= this.extend(after).finally(() => (this.reading = null)));
      await reading;
      // A read that started before this look asked cannot answer it: the next one will.
    }
    const end = Math.min(this.through, after + maxScan);
    const keys = this.keys;
    const start = firstKeyAfter(keys, after);
    for (let i = start; i < keys.length;) {
      const [position, stream, type, hash] = keys[i]!;
      if (position > end) break;
      // At the first key looked at in a block: skip the rest of the block if its summary says that
      // nothing in the whole block can match.
      if ((i === start || i % TAIL_BLOCK === 0) && !this.mayMatch(Math.floor(i / TAIL_BLOCK), filter)) {
        i = (Math.floor(i / TAIL_BLOCK) + 1) * TAIL_BLOCK;
        continue;
      }
      if (matchesType(filter, type) && matchesStream(filter, stream, hash))
        return { through: end, head: this.head, first: position };
      i++;
    }
    return { through: end, head: this.head, first: null };
  }

  /**
   * False when no key of block `b` (as many of its keys as are held) can match `filter`: none of
   * its types is in the block, or none of its categories or stream prefixes (when it has some). A
   * partition is not summarised: the block's keys are then looked at one by one.
   */
  private mayMatch(b: number, filter: EventFilter): boolean {
    const held = Math.min(TAIL_BLOCK, this.keys.length - b * TAIL_BLOCK);
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
      this.keys = page.keys;
      this.blocks = [];
      this.base = from;
    } else {
      for (const k of page.keys) this.keys.push(k);
      // Trimmed to the last `tailKeys` or more once twice as many: a copy now and then, not at every
      // read; whole blocks, so that the summaries kept still describe their keys.
      const excess = this.keys.length - this.tailKeys;
      if (excess >= this.tailKeys) {
        const drop = excess - (excess % TAIL_BLOCK);
        this.base = this.keys[drop - 1]![0];
        this.keys = this.keys.slice(drop);
        this.blocks = this.blocks.slice(drop / TAIL_BLOCK);
      }
    }
    this.through = page.through;
    this.head = page.head;
    this.readAt = started;
  }
}

/** The summary of the `size` keys from index `from`. */
function summarise(keys: readonly EventKey[], from: number, size: number): BlockSummary {
  const types = new Set<string>();
  const streams = new Set<string>();
  for (let i = from; i < from + size; i++) {
    const key = keys[i]!;
    streams.add(key[1]);
    types.add(key[2]);
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
