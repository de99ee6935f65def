import type { RecordedEvent } from '../core/event.js';
import type { SubscriptionMessage } from '../core/subscription.js';

/** A unit of work for the runtime: one target transaction's events, or a caught-up marker. */
export type Work =
  | { kind: 'events'; events: RecordedEvent[]; redelivery: boolean }
  | { kind: 'caught_up'; position: number }
  | { kind: 'end' };

/**
 * Turns a subscription's messages into batches: consecutive event messages are merged up to `size`
 * events, waiting at most `maxWaitMs` after the first for more. A caught-up marker or a redelivery
 * closes the batch and comes out on its own, so order is kept.
 */
export class MessageBatcher {
  private pending: Promise<IteratorResult<SubscriptionMessage>> | null = null;
  private held: SubscriptionMessage | null = null;
  private ended = false;

  constructor(
    private readonly it: AsyncIterator<SubscriptionMessage>,
    private readonly size: number,
    private readonly maxWaitMs: number,
  ) {}

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
    if (first.kind === 'caught_up') return { kind: 'caught_up', position: first.position };
    const events = [...first.events];
    if (first.redelivery || this.maxWaitMs <= 0) return { kind: 'events', events, redelivery: first.redelivery };
    const deadline = Date.now() + this.maxWaitMs;
    while (events.length < this.size) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      const r = await this.pullWithin(left);
      if (r === 'timeout') break;
      if (r.done) {
        this.ended = true;
        break;
      }
      const m = r.value;
      if (m.kind === 'caught_up' || m.redelivery) {
        this.held = m;
        break;
      }
      events.push(...m.events);
    }
    return { kind: 'events', events, redelivery: false };
  }
}
