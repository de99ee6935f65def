import type { ScannedPage } from './subscriptionSource.js';

/** A page of the log being read ahead: up to `limit` events after position `after`. */
interface AheadPage {
  after: number;
  limit: number;
  page: Promise<ScannedPage>;
}

/**
 * The pages a subscription reads ahead, for sources whose reads wait on I/O: while the consumer
 * processes the pages delivered, the next ones are read one after the other, as long as the log
 * goes on beyond them and `maxInFlight` leaves room. The pages read ahead count against
 * `maxInFlight` together with what the subscription holds (`held`), so memory stays bounded by
 * `maxInFlight` events. With the consumer runtime's defaults a whole catch-up transaction's pages
 * are read while the one before commits.
 */
export class ReadAhead {
  /** Pages read ahead, in log order, each after the position the one before read through. */
  private pages: AheadPage[] = [];
  /** Bumped when the pages are dropped, so that a chain of reads in progress stops. */
  private generation = 0;
  /** True while a chain of reads runs (at most one does). */
  private reading = false;
  /** The room of the page `take` returned, until the subscription has delivered it (`release`). */
  private taken = 0;

  constructor(
    /** One page of the log: up to `limit` events after `after`. */
    private readonly fetch: (after: number, limit: number) => Promise<ScannedPage>,
    private readonly options: { batchSize: number; maxInFlight: number },
    /** Events the subscription holds (delivered and unacknowledged), or null once it has ended. */
    private readonly held: () => number | null,
  ) {}

  /** Events the pages read ahead may hold (their limits), with the one taken and not yet released. */
  room(): number {
    let room = this.taken;
    for (const entry of this.pages) room += entry.limit;
    return room;
  }

  /** The room the first page read ahead holds when it follows on from `readPos`; drops stale pages. */
  nextLimit(readPos: number): number {
    const first = this.pages[0];
    if (!first) return 0;
    if (first.after === readPos) return first.limit;
    this.drop();
    return 0;
  }

  /**
   * The first page read ahead, when it follows on from `readPos`, kept to `limit` events; null (and
   * the pages dropped) when none does. Its room stays counted until `release`.
   */
  async take(readPos: number, limit: number): Promise<ScannedPage | null> {
    const first = this.pages[0];
    if (!first || first.after !== readPos) {
      this.drop();
      return null;
    }
    this.pages.shift();
    this.taken = first.limit;
    const page = await first.page;
    if (page.events.length <= limit) return page;
    // Redeliveries took some of the room since: keep to the limit (the read position follows, and
    // the pages after this one no longer follow on from it).
    this.drop();
    const events = page.events.slice(0, limit);
    return { events, through: events[events.length - 1]!.position, head: page.head };
  }

  /** The page `take` returned is delivered (or parked): its room no longer counts as read ahead. */
  release(): void {
    this.taken = 0;
  }

  /** Forgets the pages read ahead (their reads finish unseen) and stops a chain of reads in progress. */
  drop(): void {
    if (this.pages.length === 0 && !this.reading) return;
    this.pages = [];
    this.generation++;
  }

  /** Starts reading the pages after `readPos` (after those already read ahead), unless a chain runs. */
  start(readPos: number): void {
    if (this.reading) return;
    this.reading = true;
    this.chain(readPos)
      .catch(() => undefined)
      .finally(() => (this.reading = false));
  }

  private async chain(readPos: number): Promise<void> {
    const generation = this.generation;
    const { batchSize, maxInFlight } = this.options;
    // Where the last page queued by this chain (or before it) read through, once read.
    let after = readPos;
    const last = this.pages[this.pages.length - 1];
    if (last) {
      const page = await last.page;
      if (generation !== this.generation || page.through >= page.head) return;
      after = page.through;
    }
    for (;;) {
      const held = this.held();
      if (held === null || generation !== this.generation) return;
      const room = maxInFlight - held - this.room();
      if (room <= 0) return;
      const limit = Math.min(room, batchSize);
      const entry: AheadPage = { after, limit, page: this.fetch(after, limit) };
      // Consumed (and its error thrown) by `take`; dropped unseen if the subscription ends first.
      entry.page.catch(() => undefined);
      this.pages.push(entry);
      const page = await entry.page;
      // A page that read through the head it saw: live reads are not read ahead.
      if (page.through >= page.head) return;
      after = page.through;
    }
  }
}
