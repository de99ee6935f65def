import type { Consumer as JsConsumer, ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { IdemError, InvalidInputError } from '../core/errors.js';
import type { RecordedEvent } from '../core/event.js';
import { matchesFilter, type EventFilter } from '../core/filter.js';
import type {
  FailureInfo,
  ParkInfo,
  ParkResult,
  Subscription,
  SubscriptionMessage,
} from '../core/subscription.js';
import { eventOf, readDelivery, type Delivery } from './deliveredMessage.js';

/** Delivery figures the source keeps across its subscriptions (shown in the consumer's metrics). */
export interface DeliveryCounts {
  /** Messages received, redeliveries included. */
  received: number;
  /** Messages JetStream delivered more than once (delivery count above 1). */
  redelivered: number;
  /** The highest delivery count seen on a message. */
  maxDeliveryCount: number;
  /** Messages acknowledged after their target commit (or at once, for events outside the filter). */
  acked: number;
  /** Messages without idem headers, terminated (never redelivered). */
  foreign: number;
}

export interface JetStreamSubscriptionSettings {
  name: string;
  /** The connection the messages arrive on: acknowledgements are published on it. */
  nc: NatsConnection;
  durable: string;
  filter: EventFilter;
  batchSize: number;
  maxInFlight: number;
  /** The consumer sequence JetStream delivers next, or 0 when unknown. */
  nextDelivery: number;
  /** Set when the durable has nothing pending or awaiting an ack: `caught_up` comes first. */
  caughtUpAt: number | null;
  /** The position of the last event the durable's subject holds (for a `caught_up` marker). */
  head(): Promise<number>;
  counts: DeliveryCounts;
  signal: AbortSignal | undefined;
}

/**
 * How a delivered message is acknowledged: its reply subject, which JetStream's `+ACK` is published
 * to (what `JsMsg.ack()` does), or the message itself when the client does not show the subject.
 * Keeping the subject alone lets the message, its decoded headers and its read buffer go as soon as
 * the event is read from it: a batch waits for its commit, and the young-generation collector would
 * copy thousands of retained messages meanwhile.
 */
type AckHandle = string | JsMsg;

const ACK = Uint8Array.of(43, 65, 67, 75); // "+ACK"

/** The reply subject JetStream acknowledgements go to (the client's message class exposes it). */
function ackHandle(msg: JsMsg): AckHandle {
  const reply = (msg as JsMsg & { reply?: unknown }).reply;
  return typeof reply === 'string' && reply !== '' ? reply : msg;
}

/** Reads a delivered message's delivery figures into `into`: from its reply subject, else from `msg.info`. */
function readInfo(msg: JsMsg, ack: AckHandle, into: Delivery): void {
  if (typeof ack === 'string' && readDelivery(ack, into)) return;
  const info = msg.info;
  into.count = info.deliveryCount;
  into.sequence = info.deliverySequence;
  into.pending = info.pending;
}

/**
 * One ownership of a JetStream durable as an idem subscription. Messages are delivered in stream
 * order (the relay's position order); batches are what has arrived, up to the batch size. A message
 * at or below a position delivered before is a redelivery and comes in a batch of its own, flagged
 * `redelivery`, so that the runtime asks its ledger about it.
 *
 * `ack(position)` acknowledges, one message at a time, every delivered message at or below
 * `position`: only messages the runtime committed (a copy JetStream delivered again of an event at or
 * below it is one the runtime committed, or skips by its ledger). An ack-all would also
 * acknowledge messages JetStream delivered but that never reached this process (lost in a reconnect);
 * a jump in JetStream's delivery sequence ends the subscription instead, so that the next one starts
 * from the durable's acknowledgement floor.
 */
export class JetStreamSubscription implements Subscription {
  readonly epoch = 0;
  readonly startPosition = 0;
  // Arrived messages not yet in a batch, and delivered ones not yet acknowledged: side by side, the
  // event (or its position) and how its message is acknowledged.
  private readonly queued: RecordedEvent[] = [];
  private readonly queuedAcks: AckHandle[] = [];
  private readonly unacked: number[] = [];
  private readonly unackedAcks: AckHandle[] = [];
  private readonly delivery: Delivery = { count: 0, sequence: 0, pending: 0 };
  private messages: ConsumerMessages | null = null;
  private maxSeen = 0;
  private nextDelivery: number;
  private lastPending = -1;
  private caughtUpDue: number | null;
  private error: Error | null = null;
  private closed = false;
  private wake: (() => void) | null = null;
  private wakeDue = false;
  private space: (() => void) | null = null;
  private pump: Promise<void> | null = null;

  constructor(private readonly s: JetStreamSubscriptionSettings) {
    this.nextDelivery = s.nextDelivery;
    this.caughtUpDue = s.caughtUpAt;
    s.signal?.addEventListener('abort', () => void this.close(), { once: true });
  }

  get consumer(): string {
    return this.s.name;
  }

  /** Starts pulling from the durable. */
  async start(consumer: JsConsumer): Promise<void> {
    const max = Math.min(this.s.maxInFlight, Math.max(this.s.batchSize * 2, 64));
    this.messages = await consumer.consume({ max_messages: max });
    this.pump = this.run(this.messages);
  }

  private async run(messages: ConsumerMessages): Promise<void> {
    try {
      for await (const msg of messages) {
        if (this.closed) break;
        this.receive(msg);
        if (this.error) break;
        while (!this.closed && this.queued.length + this.unacked.length >= this.s.maxInFlight)
          await new Promise<void>((r) => (this.space = r));
      }
      if (!this.closed && !this.error)
        this.error = new IdemError('unavailable', `JetStream stopped delivering to "${this.s.durable}"`);
    } catch (err) {
      if (!this.closed)
        this.error = new IdemError(
          'unavailable',
          `JetStream delivery to "${this.s.durable}" failed: ${(err as Error).message}`,
          {},
          { cause: err },
        );
    } finally {
      this.notify();
    }
  }

  private receive(msg: JsMsg): void {
    const ack = ackHandle(msg);
    const info = this.delivery;
    readInfo(msg, ack, info);
    const c = this.s.counts;
    c.received++;
    if (info.count > 1) c.redelivered++;
    c.maxDeliveryCount = Math.max(c.maxDeliveryCount, info.count);
    if (this.nextDelivery > 0 && info.sequence > this.nextDelivery) {
      this.error = new IdemError(
        'unavailable',
        `JetStream deliveries ${this.nextDelivery}-${info.sequence - 1} of "${this.s.durable}" never arrived; starting over from its acknowledgement floor`,
      );
      return;
    }
    this.nextDelivery = info.sequence + 1;
    this.lastPending = info.pending;
    const event = eventOf(msg);
    if (!event) {
      c.foreign++;
      msg.term('not an idem event (no Idem-Position header)');
    } else if (!matchesFilter(this.s.filter, event)) {
      c.acked++;
      this.maxSeen = Math.max(this.maxSeen, event.position);
      msg.ack();
    } else {
      this.queued.push(event);
      this.queuedAcks.push(ack);
    }
    if (this.queued.length >= this.s.batchSize) this.notify();
    else this.notifySoon();
  }

  /** Ends the subscription with `unavailable` (the runtime subscribes again): NATS reconnected. */
  interrupt(reason: string): void {
    if (this.closed || this.error) return;
    this.error = new IdemError('unavailable', reason);
    void this.messages?.close().catch(() => undefined);
    this.notify();
  }

  private notify(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  /**
   * Wakes the reader once the messages of this socket read are queued (or a batch is full, above):
   * the client hands them over one microtask each, and a reader woken at the first takes a batch of
   * one, then one per message. Waiting for the check phase alone would hold a catch-up's first batch
   * until the client has read everything pulled.
   */
  private notifySoon(): void {
    if (this.wakeDue || this.wake === null) return;
    this.wakeDue = true;
    setImmediate(() => {
      this.wakeDue = false;
      this.notify();
    });
  }

  /** The next batch: what has arrived (in order, or a run of redeliveries), or a caught-up marker. */
  private async next(): Promise<IteratorResult<SubscriptionMessage>> {
    for (;;) {
      if (this.closed) return { done: true, value: undefined };
      if (this.queued.length > 0) return { done: false, value: this.batch() };
      if (this.error) throw this.error;
      if (this.caughtUpDue === null && this.lastPending === 0) this.caughtUpDue = this.maxSeen;
      if (this.caughtUpDue !== null) {
        const at = this.caughtUpDue;
        this.caughtUpDue = null;
        this.lastPending = -1;
        return { done: false, value: { kind: 'caught_up', position: Math.max(at, this.maxSeen) } };
      }
      await new Promise<void>((r) => (this.wake = r));
    }
  }

  private batch(): SubscriptionMessage {
    const queued = this.queued;
    const redelivery = queued[0]!.position <= this.maxSeen;
    const most = Math.min(queued.length, this.s.batchSize);
    let n = 0;
    for (; n < most; n++) {
      const at = queued[n]!.position;
      if (at <= this.maxSeen !== redelivery) break;
      this.unacked.push(at);
      this.unackedAcks.push(this.queuedAcks[n]!);
      if (!redelivery) this.maxSeen = at;
    }
    const events = queued.splice(0, n);
    this.queuedAcks.splice(0, n);
    this.space?.();
    this.space = null;
    // Redelivered events go to the runtime in position order, so each entity's stay in version order.
    if (redelivery) events.sort((a, b) => a.position - b.position);
    return { kind: 'events', events, redelivery };
  }

  ack(position: number): Promise<void> {
    const { unacked, unackedAcks } = this;
    const nc = this.s.nc;
    let kept = 0;
    for (let i = 0; i < unacked.length; i++) {
      const ack = unackedAcks[i]!;
      if (unacked[i]! <= position) {
        if (typeof ack === 'string') nc.publish(ack, ACK);
        else ack.ack();
      } else {
        unacked[kept] = unacked[i]!;
        unackedAcks[kept++] = ack;
      }
    }
    this.s.counts.acked += unacked.length - kept;
    unacked.length = kept;
    unackedAcks.length = kept;
    this.space?.();
    this.space = null;
    return Promise.resolve();
  }

  park(_position: number, _info: ParkInfo): Promise<ParkResult> {
    return Promise.reject(
      new InvalidInputError(
        'onError.then',
        "jetStreamSource keeps no dead letters: use onError.then 'stop' (the consumer stops at the event, JetStream keeps it)",
      ),
    );
  }

  fail(_info: FailureInfo): Promise<void> {
    return Promise.resolve();
  }

  /** JetStream keeps no consumer records of idem's: an outage pause is the runtime's alone. */
  outage(_active: boolean): Promise<void> {
    return Promise.resolve();
  }

  /** Called once the subscription is closed. */
  onClose: () => void = () => undefined;

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
    this.notify();
    this.space?.();
    await this.messages?.close().catch(() => undefined);
    await this.pump;
  }

  [Symbol.asyncIterator](): AsyncIterator<SubscriptionMessage> {
    return {
      next: () => this.next(),
      return: async () => {
        await this.close();
        return { done: true, value: undefined };
      },
    };
  }
}
