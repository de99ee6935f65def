import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { ConsumerSource, SourceMetrics } from '../core/consumerSource.js';
import { IdemError, InvalidInputError } from '../core/errors.js';
import type { RecordedEvent } from '../core/event.js';
import type { EventStore, ReadStreamOptions } from '../core/eventStore.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';
import { MAX_BATCH_SIZE, MAX_IN_FLIGHT } from '../core/limits.js';
import { SUBSCRIBE_OPTION_KEYS, type SubscribeOptions, type Subscription } from '../core/subscription.js';
import { boundedInt } from '../core/validation.js';
import { loadNats } from './loadNats.js';
import { eventFromMessage } from './relayMessage.js';
import { validateJetStreamName, validateSubject } from './relayStream.js';
import { readyDurable } from './sourceDurable.js';
import { JetStreamSubscription, type DeliveryCounts } from './jetStreamSubscription.js';

export interface JetStreamSourceOptions {
  /** NATS server URL(s), e.g. `nats://127.0.0.1:4222`. Ignored when `connection` is given. */
  servers?: string | string[];
  /** An open NATS connection to use instead of `servers`; the source does not close it. */
  connection?: NatsConnection;
  /** The JetStream stream a relay publishes into. */
  stream: string;
  /** The JetStream durable pull consumer that holds the cursor; created when missing. */
  durable: string;
  /** Only messages on this subject (part of the durable's identity). @default every subject of the stream */
  filterSubject?: string;
  /**
   * The idem store the stream was relayed from: the runtime reads missing versions there to fill a
   * version gap (`gaps: 'recover'`). @default none (a gap stops the consumer)
   */
  recoverFrom?: Pick<EventStore, 'readStream'>;
  /** How long JetStream waits for an ack before delivering a message again (a new durable's `ack_wait`). @default 30000 */
  ackWaitMs?: number;
  /** Most messages delivered and not acknowledged (a new durable's `max_ack_pending`). @default 10000 */
  maxAckPending?: number;
}

/** A `source` for `createConsumer` that reads a JetStream stream written by the relay. */
export interface JetStreamSource extends ConsumerSource {
  readonly stream: string;
  readonly durable: string;
  /** Closes the source's own NATS connection (not one it was given). Stop the consumer first. */
  close(): Promise<void>;
}

const SOURCE_OPTION_KEYS = {
  servers: true,
  connection: true,
  stream: true,
  durable: true,
  filterSubject: true,
  recoverFrom: true,
  ackWaitMs: true,
  maxAckPending: true,
} as const satisfies KnownKeys<JetStreamSourceOptions>;

/** How often the durable's pending and ack-pending counts are read for the metrics. */
const INFO_INTERVAL_MS = 1000;

/**
 * A consumer source on a JetStream durable pull consumer, for streams the idem relay writes: each
 * message is the idem event its headers and body carry (docs/nats.md). The consumer runtime commits
 * a batch in its target, then this source acknowledges the batch's messages one by one, so a crash
 * before the acks gets them again and the ledger skips them.
 */
export function jetStreamSource(options: JetStreamSourceOptions): JetStreamSource {
  return new Source(options);
}

interface Connected {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
}

class Source implements JetStreamSource {
  readonly stream: string;
  readonly durable: string;
  private readonly filterSubject: string | undefined;
  private readonly ackWaitMs: number;
  private readonly maxAckPending: number;
  private connecting: Promise<Connected> | null = null;
  private readonly counts: DeliveryCounts = {
    received: 0,
    redelivered: 0,
    maxDeliveryCount: 0,
    acked: 0,
    foreign: 0,
  };
  private durableInfo = { pending: 0, ackPending: 0, remade: 0 };
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly live = new Set<JetStreamSubscription>();

  readonly readStream?: (stream: string, options?: ReadStreamOptions) => AsyncIterable<RecordedEvent>;

  constructor(private readonly options: JetStreamSourceOptions) {
    if (!options || typeof options !== 'object') throw new InvalidInputError('options', 'must be an object');
    checkKnownKeys(options, SOURCE_OPTION_KEYS, '');
    if (!options.connection && options.servers === undefined)
      throw new InvalidInputError('servers', 'is required (or give an open connection)');
    this.stream = validateJetStreamName(options.stream, 'stream');
    this.durable = validateJetStreamName(options.durable, 'durable');
    this.filterSubject =
      options.filterSubject === undefined ? undefined : validateFilterSubject(options.filterSubject);
    this.ackWaitMs = boundedInt(options.ackWaitMs, 'ackWaitMs', 100, 3_600_000, 30_000);
    this.maxAckPending = boundedInt(options.maxAckPending, 'maxAckPending', 1, MAX_IN_FLIGHT, 10_000);
    const from = options.recoverFrom;
    if (from !== undefined) {
      if (typeof from?.readStream !== 'function')
        throw new InvalidInputError('recoverFrom', 'must be an idem store (with readStream)');
      this.readStream = (stream, o) => from.readStream(stream, o);
    }
  }

  private async connect(): Promise<Connected> {
    if (this.closed) throw new IdemError('closed', 'the JetStream source is closed');
    const current = await this.connecting?.catch(() => null);
    if (current?.nc.isClosed() && !this.options.connection) this.connecting = null;
    this.connecting ??= (async () => {
      const nats = await loadNats();
      // Its own connection reconnects for as long as the source lives: a NATS restart is a pause.
      const nc =
        this.options.connection ??
        (await nats.connect({ servers: this.options.servers!, maxReconnectAttempts: -1 }));
      void this.watchStatus(nc);
      return { nc, js: nats.jetstream(nc), jsm: await nats.jetstreamManager(nc) };
    })().catch((err: unknown) => {
      this.connecting = null;
      throw err;
    });
    return this.connecting;
  }

  async subscribe(consumer: string, options: SubscribeOptions = {}): Promise<Subscription> {
    checkKnownKeys(options, SUBSCRIBE_OPTION_KEYS, '');
    const from = options.from ?? 'start';
    if (from !== 'start' && from !== 'end')
      throw new InvalidInputError('from', "must be 'start' or 'end' for a JetStream durable");
    const { nc, js, jsm } = await this.connect();
    const { info, remade } = await readyDurable(jsm, {
      stream: this.stream,
      durable: this.durable,
      filterSubject: this.filterSubject,
      from,
      ackWaitMs: this.ackWaitMs,
      maxAckPending: this.maxAckPending,
    });
    if (remade) this.durableInfo.remade++;
    this.durableInfo.pending = info.num_pending;
    this.durableInfo.ackPending = info.num_ack_pending;
    const idle = info.num_pending === 0 && info.num_ack_pending === 0;
    const sub = new JetStreamSubscription({
      name: consumer,
      nc,
      durable: this.durable,
      filter: options.filter ?? {},
      batchSize: boundedInt(options.batchSize, 'batchSize', 1, MAX_BATCH_SIZE, 500),
      maxInFlight: boundedInt(options.maxInFlight, 'maxInFlight', 1, MAX_IN_FLIGHT, 1000),
      // A durable made again from its floor delivers from consumer sequence 1.
      nextDelivery: remade ? 1 : info.delivered.consumer_seq + 1,
      caughtUpAt: idle ? await this.headPosition() : null,
      head: () => this.headPosition(),
      counts: this.counts,
      signal: options.signal,
    });
    await sub.start(await js.consumers.get(this.stream, this.durable));
    this.live.add(sub);
    sub.onClose = () => this.live.delete(sub);
    this.watch(jsm);
    return sub;
  }

  /**
   * After a reconnect, pull requests and deliveries of the old connection may be gone (a restarted
   * server forgets them): the live subscriptions end, and the runtime's next one starts from the
   * durable's acknowledgement floor.
   */
  private async watchStatus(nc: NatsConnection): Promise<void> {
    for await (const s of nc.status()) {
      if (s.type !== 'reconnect') continue;
      for (const sub of this.live)
        sub.interrupt(`NATS reconnected; "${this.durable}" starts over from its acknowledgement floor`);
    }
  }

  /** Reads the durable's pending counts for the metrics, once a second, without keeping the process alive. */
  private watch(jsm: JetStreamManager): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      jsm.consumers.info(this.stream, this.durable).then(
        (i) => {
          this.durableInfo.pending = i.num_pending;
          this.durableInfo.ackPending = i.num_ack_pending;
        },
        () => undefined,
      );
    }, INFO_INTERVAL_MS);
    this.timer.unref();
  }

  /** The position of the last event on the durable's subject (the stream's last message without one). */
  async headPosition(): Promise<number> {
    const { jsm } = await this.connect();
    try {
      const msg =
        this.filterSubject === undefined
          ? await lastMessage(jsm, this.stream)
          : await jsm.streams.getMessage(this.stream, { last_by_subj: this.filterSubject });
      return msg ? (eventFromMessage(msg.header, msg.data)?.position ?? 0) : 0;
    } catch (err) {
      if ((err as { code?: unknown }).code === 10037 || /no message found/i.test((err as Error).message))
        return 0;
      throw err;
    }
  }

  metrics(): SourceMetrics {
    return {
      ...this.counts,
      pending: this.durableInfo.pending,
      ackPending: this.durableInfo.ackPending,
      remade: this.durableInfo.remade,
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    const c = await this.connecting?.catch(() => null);
    if (c && !this.options.connection) await c.nc.close().catch(() => undefined);
  }
}

async function lastMessage(jsm: JetStreamManager, stream: string) {
  const info = await jsm.streams.info(stream);
  if (info.state.messages === 0) return null;
  return jsm.streams.getMessage(stream, { seq: info.state.last_seq });
}

/** A subject that may end in wildcards (`orders.*`, `orders.>`). */
function validateFilterSubject(subject: unknown): string {
  if (typeof subject !== 'string') throw new InvalidInputError('filterSubject', 'must be a NATS subject');
  const plain = subject
    .split('.')
    .map((t) => (t === '*' || t === '>' ? 'x' : t))
    .join('.');
  validateSubject(plain, 'filterSubject');
  return subject;
}
