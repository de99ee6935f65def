import { matchesStream, matchesType, type EventFilter } from '../core/filter.js';
import { firstKeyAfter, type EventKey, type KeyPage } from './subscriptionSource.js';

/** Keys the tail holds at least (at most twice as many); a subscription further behind reads for itself. */
const TAIL_KEYS = 20_000;

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
  /** The keys hold every event at positions in (`base`, `through`]; none yet while `through` < 0. */
  private base = 0;
  private through = -1;
  private head = 0;
  /** The highest head committed by this process, as `onAppend` reports it. */
  private known = 0;
  /** When the read of the last keys started. */
  private readAt = 0;
  private reading: Promise<void> | null = null;

  constructor(
    private readonly scanKeys: (after: number, maxScan: number) => Promise<KeyPage>,
    private readonly freshMs: number,
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
    for (let i = firstKeyAfter(keys, after); i < keys.length; i++) {
      const [position, stream, type, hash] = keys[i]!;
      if (position > end) break;
      if (matchesType(filter, type) && matchesStream(filter, stream, hash))
        return { through: end, head: this.head, first: position };
    }
    return { through: end, head: this.head, first: null };
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
    const page = await this.scanKeys(from, TAIL_KEYS);
    if (from !== this.through) {
      this.keys = page.keys;
      this.base = from;
    } else {
      for (const k of page.keys) this.keys.push(k);
      // Trimmed to the last `TAIL_KEYS` once twice as many: a copy now and then, not at every read.
      const drop = this.keys.length - TAIL_KEYS;
      if (drop >= TAIL_KEYS) {
        this.base = this.keys[drop - 1]![0];
        this.keys = this.keys.slice(drop);
      }
    }
    this.through = page.through;
    this.head = page.head;
    this.readAt = started;
  }
}
