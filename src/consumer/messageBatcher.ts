import type { RecordedEvent } from '../core/event.js';
import type { ConsumerPause, SubscriptionMessage } from '../core/subscription.js';

/** A unit of work for the runtime: one target transaction's events, or a caught-up marker. */
export type Work =
  | { kind: 'events'; events: RecordedEvent[]; redelivery: boolean }
  | { kind: 'caught_up'; position: number }
  | { kind: 'paused'; pause: ConsumerPause | null }
  | { kind: 'end' };

/**
 * Turns a subscription's messages into batches, keeping order: a caught-up marker, a pause or a
 * redelivery closes the batch and comes out on its own.
 *
 * - While catching up (until the subscription's first caught-up marker) consecutive pages are merged
 *   up to `catchUpSize()` events (at least `size`; read as each batch starts: the runtime lowers it
 *   after a failed transaction) without any timer: a catch-up source delivers either the next page or
 *   the caught-up marker without waiting for new appends, so nothing is held back.
 * - Once live, consecutive event messages are merged up to `size` events, waiting at most
 *   `maxWaitMs` after the first for more (0: each message is a batch).
 *
 * A message that would take a batch over its limit is held for the next batch.
 */
export class MessageBatcher {
  private pending: Promise<IteratorResult<SubscriptionMessage>> | null = null;
  private held: SubscriptionMessage | null = null;
  private ended = false;
  private live = false;
  private readonly size: number;
  private readonly catchUpSize: () => number;
  private readonly maxWaitMs: number;

  constructor(
    private readonly it: AsyncIterator<SubscriptionMessage>,
    limits: { size: number; catchUpSize: () => number; maxWaitMs: number },
  ) {
    this.size = limits.size;
    this.catchUpSize = limits.catchUpSize;
    this.maxWaitMs = limits.maxWaitMs;
  }

  private pull(): Promise<IteratorResult<SubscriptionMessage>> {
    const p = this.pending ?? this.it.next();
    this.pending = null;
    return p;
  }

  /** The next message, or `timeout` when none arrives within `ms` (the read stays pending for later). */
  private async pullWithin(ms: number): Promise<IteratorResult<SubscriptionMessage> | 'timeout'> {
    const p = this.pending ?? this.it.next();
    this.pending = p;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), Math.max(0, ms));
    });
    try {
      const r = await Promise.race([p, timeout]);
      if (r !== 'timeout') this.pending = null;
      return r;
    } finally {
      clearTimeout(timer);
    }
  }

  async next(): Promise<Work> {
    if (this.ended) return { kind: 'end' };
    let first: SubscriptionMessage;
    if (this.held) {
      first = this.held;
      this.held = null;
    } else {
      const r = await this.pull();
      if (r.done) {
        this.ended = true;
        return { kind: 'end' };
      }
      first = r.value;
    }
    if (first.kind === 'caught_up') {
      this.live = true;
      return { kind: 'caught_up', position: first.position };
    }
    if (first.kind === 'paused') return first;
    const events = [...first.events];
    if (first.redelivery) return { kind: 'events', events, redelivery: true };
    if (!this.live) await this.mergeCatchUp(events);
    else if (this.maxWaitMs > 0) await this.mergeLive(events);
    return { kind: 'events', events, redelivery: false };
  }

  /** Appends the pages that follow to `events`, up to `catchUpSize` events or the caught-up marker. */
  private async mergeCatchUp(events: RecordedEvent[]): Promise<void> {
    const limit = this.catchUpSize();
    while (events.length < limit) {
      const r = await this.pull();
      if (r.done) {
        this.ended = true;
        return;
      }
      if (!this.take(events, r.value, limit)) return;
    }
  }

  /** Appends the messages that arrive within `maxWaitMs` to `events`, up to `size` events. */
  private async mergeLive(events: RecordedEvent[]): Promise<void> {
    const deadline = Date.now() + this.maxWaitMs;
    while (events.length < this.size) {
      const left = deadline - Date.now();
      if (left <= 0) return;
      const r = await this.pullWithin(left);
      if (r === 'timeout') return;
      if (r.done) {
        this.ended = true;
        return;
      }
      if (!this.take(events, r.value, this.size)) return;
    }
  }

  /** Adds an ordinary event message to the batch if it fits in `limit`; otherwise holds it for the next batch. */
  private take(events: RecordedEvent[], m: SubscriptionMessage, limit: number): boolean {
    if (m.kind !== 'events' || m.redelivery || events.length + m.events.length > limit) {
      this.held = m;
      return false;
    }
    for (const e of m.events) events.push(e);
    return true;
  }
}
