import type { JetStreamClient, JetStreamManager, PubAck } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { IdemError, InvalidInputError, isIdemError } from '../core/errors.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';
import { MAX_BATCH_SIZE } from '../core/limits.js';
import type { RecordedEvent } from '../core/event.js';
import type { EventStore } from '../core/eventStore.js';
import type { EventFilter } from '../core/filter.js';
import { validateConsumerName } from '../core/validation.js';
import { backoffDelay, sleep } from '../core/backoff.js';
import { loadNats, type NatsModules } from './loadNats.js';
import { eventBody, writeEventHeaders } from './relayMessage.js';
import {
  ensureRelayStream,
  lastRelayed,
  validateJetStreamName,
  validateSubject,
  type RelayStreamCreation,
} from './relayStream.js';

export interface JetStreamRelayOptions {
  /** The idem store whose committed events are published. */
  store: EventStore;
  /** NATS server URL(s), e.g. `nats://127.0.0.1:4222`. Ignored when `connection` is given. */
  servers?: string | string[];
  /** An open NATS connection to use instead of `servers`; the relay does not close it. */
  connection?: NatsConnection;
  /** The JetStream stream to publish into. */
  stream: string;
  /** The subject of every relayed message. @default `<stream>.events` */
  subject?: string;
  /** Only events matching this filter are relayed. Part of the relay consumer's identity. @default {} */
  filter?: EventFilter;
  /** The relay's durable consumer name in the idem store (its cursor). @default `nats_relay.<stream>` */
  name?: string;
  /** Create the JetStream stream when it does not exist. @default undefined (it must exist) */
  create?: RelayStreamCreation | boolean;
  /** Most publishes awaiting their PubAck at once. @default 256 */
  window?: number;
  /** Events per page read from the store (and published before the cursor moves), at most 5000. @default 500 */
  batchSize?: number;
  /** How long a publish waits for its PubAck before the relay starts over from JetStream's last message. @default 5000 */
  publishTimeoutMs?: number;
  /**
   * Lease time to live of the relay consumer: how long a killed relay's standby waits before taking
   * over. @default the store's (10000)
   */
  leaseTtlMs?: number;
  /** Called with each error the relay recovers from by starting over (after a backoff). */
  onError?: (error: Error) => void;
}

export type JetStreamRelayState = 'idle' | 'starting' | 'running' | 'stopping' | 'stopped' | 'failed';

export interface JetStreamRelayStatus {
  state: JetStreamRelayState;
  /** The idem consumer that holds the relay's cursor. */
  consumer: string;
  /** The store position the relay has published (and acknowledged) through. */
  position: number;
  /** Events published and acknowledged by JetStream in this process. */
  published: number;
  /** Publishes JetStream answered as duplicates (already stored under the same event id). */
  duplicates: number;
  /** Times the relay started over from JetStream's last message after an error. */
  restarts: number;
  lastError: { name: string; message: string } | null;
}

export interface JetStreamRelay {
  /** Connects, checks or creates the JetStream stream and starts relaying. Resolves once it runs. */
  start(): Promise<void>;
  /** Resolves once every event committed before the call is published and acknowledged. */
  whenCaughtUp(): Promise<void>;
  /** Finishes the page in flight, releases the consumer and closes its own NATS connection. */
  stop(): Promise<void>;
  status(): JetStreamRelayStatus;
}

const RELAY_OPTION_KEYS = {
  store: true,
  servers: true,
  connection: true,
  stream: true,
  subject: true,
  filter: true,
  name: true,
  create: true,
  window: true,
  batchSize: true,
  publishTimeoutMs: true,
  leaseTtlMs: true,
  onError: true,
} as const satisfies KnownKeys<JetStreamRelayOptions>;
const CREATE_KEYS = {
  storage: true,
  replicas: true,
  duplicateWindowMs: true,
} as const satisfies KnownKeys<RelayStreamCreation>;

const MAX_WINDOW = 10_000;

/**
 * Publishes every committed event of an idem store (or of a filter), in position order, into a
 * JetStream stream. The relay is a durable idem consumer: it moves its cursor only after JetStream
 * acknowledged every publish up to it. On every start it reads the stream's last message and
 * resumes after its `Idem-Position`, so a restart never publishes an event twice, whatever
 * JetStream's duplicate window. Each publish carries the previous event's id as the expected last
 * message id, so a publish lost in flight stops the later ones instead of leaving a hole.
 */
export function createJetStreamRelay(options: JetStreamRelayOptions): JetStreamRelay {
  return new Relay(options);
}

interface Pending {
  position: number;
  ack: Promise<PubAck>;
}

class Relay implements JetStreamRelay {
  private readonly store: EventStore;
  private readonly stream: string;
  private readonly subject: string;
  private readonly name: string;
  private readonly filter: EventFilter;
  private readonly create: RelayStreamCreation | undefined;
  private readonly window: number;
  private readonly batchSize: number;
  private readonly timeoutMs: number;
  private state: JetStreamRelayState = 'idle';
  private nats: NatsModules | null = null;
  private nc: NatsConnection | null = null;
  private js: JetStreamClient | null = null;
  private jsm: JetStreamManager | null = null;
  private readonly abort = new AbortController();
  private loop: Promise<void> | null = null;
  /** Store position covered: published and acknowledged, or (after caught_up) known to hold nothing to relay. */
  private covered = 0;
  private position = 0;
  private published = 0;
  private duplicates = 0;
  private restarts = 0;
  private lastError: Error | null = null;
  private waiters: { head: number; resolve: () => void; reject: (e: Error) => void }[] = [];

  constructor(private readonly options: JetStreamRelayOptions) {
    if (!options || typeof options !== 'object') throw new InvalidInputError('options', 'must be an object');
    checkKnownKeys(options, RELAY_OPTION_KEYS, '');
    if (typeof options.create === 'object') checkKnownKeys(options.create, CREATE_KEYS, 'create');
    if (!options.store) throw new InvalidInputError('store', 'is required');
    if (!options.connection && options.servers === undefined)
      throw new InvalidInputError('servers', 'is required (or give an open connection)');
    this.store = options.store;
    this.stream = validateJetStreamName(options.stream, 'stream');
    this.subject = validateSubject(options.subject ?? `${this.stream}.events`, 'subject');
    this.name = validateConsumerName(options.name ?? `nats_relay.${this.stream}`, 'name');
    this.filter = options.filter ?? {};
    this.create = options.create === true ? {} : options.create || undefined;
    this.window = boundedInt(options.window, 'window', 256, MAX_WINDOW);
    this.batchSize = boundedInt(options.batchSize, 'batchSize', 500, MAX_BATCH_SIZE);
    this.timeoutMs = boundedInt(options.publishTimeoutMs, 'publishTimeoutMs', 5000, 600_000);
  }

  async start(): Promise<void> {
    if (this.state !== 'idle')
      throw new IdemError('invalid_input', `the relay is ${this.state}; start it once`);
    this.state = 'starting';
    try {
      this.nats = await loadNats();
      this.nc = this.options.connection ?? (await this.nats.connect({ servers: this.options.servers! }));
      this.js = this.nats.jetstream(this.nc, { timeout: this.timeoutMs });
      this.jsm = await this.nats.jetstreamManager(this.nc, { timeout: this.timeoutMs });
      await ensureRelayStream(this.jsm, this.stream, this.subject, this.create);
    } catch (err) {
      this.state = 'failed';
      this.lastError = asError(err);
      await this.closeConnection();
      throw err;
    }
    this.state = 'running';
    this.loop = this.run();
  }

  whenCaughtUp(): Promise<void> {
    return this.store.headPosition().then(
      (head) =>
        new Promise<void>((resolve, reject) => {
          if (this.state === 'failed') return reject(this.lastError ?? new Error('the relay failed'));
          if (this.covered >= head) return resolve();
          this.waiters.push({ head, resolve, reject });
        }),
    );
  }

  async stop(): Promise<void> {
    if (this.state === 'idle') {
      this.state = 'stopped';
      return;
    }
    if (this.state === 'running' || this.state === 'starting') this.state = 'stopping';
    this.abort.abort();
    await this.loop;
    await this.closeConnection();
    if (this.state === 'stopping') this.state = 'stopped';
    this.settleWaiters();
  }

  status(): JetStreamRelayStatus {
    const e = this.lastError;
    return {
      state: this.state,
      consumer: this.name,
      position: this.position,
      published: this.published,
      duplicates: this.duplicates,
      restarts: this.restarts,
      lastError: e ? { name: e.name, message: e.message } : null,
    };
  }

  /** Relays until stopped; after a recoverable error it waits a backoff and starts over. */
  private async run(): Promise<void> {
    let failures = 0;
    while (!this.abort.signal.aborted) {
      try {
        await this.relayOnce();
        failures = 0;
      } catch (err) {
        if (this.abort.signal.aborted) break;
        const error = asError(err);
        this.lastError = error;
        if (isFatal(err)) {
          this.state = 'failed';
          this.settleWaiters();
          return;
        }
        this.restarts++;
        this.options.onError?.(error);
        await sleep(backoffDelay(++failures, 100, 5000), this.abort.signal);
      }
    }
  }

  /**
   * One ownership of the relay consumer: take the lease (waiting as a standby while another relay
   * holds it), read JetStream's last message, then publish page by page after it.
   */
  private async relayOnce(): Promise<void> {
    const sub = await this.store.subscribe(this.name, {
      filter: this.filter,
      from: 'start',
      standby: true,
      batchSize: this.batchSize,
      // A page in flight and the next: the cursor write of one overlaps the publishes of the next.
      maxInFlight: 2 * this.batchSize,
      ...(this.options.leaseTtlMs !== undefined && { leaseTtlMs: this.options.leaseTtlMs }),
      signal: this.abort.signal,
    });
    // The cursor write of a page (a commit in the store) runs while the next page is published, one
    // at a time and in order: a live event waits for JetStream's PubAck, not also for that commit.
    let cursor: Promise<void> = Promise.resolve();
    try {
      // Read only once the lease is held: no other relay of this consumer publishes from here on.
      const last = await lastRelayed(this.jsm!, this.stream);
      let resumeAfter = Math.max(last?.position ?? 0, sub.startPosition);
      let previousId = last?.id ?? null;
      this.advance(sub.startPosition);
      for await (const msg of sub) {
        if (msg.kind === 'caught_up') {
          this.covered = Math.max(this.covered, msg.position);
          this.settleWaiters();
          continue;
        }
        // A paused relay consumer simply receives nothing until it is resumed.
        if (msg.kind === 'paused') continue;
        const pending: Pending[] = [];
        let through = 0;
        try {
          for (const e of msg.events) {
            through = e.position;
            if (e.position <= resumeAfter) continue;
            if (pending.length >= this.window) await this.settle(pending.shift()!);
            pending.push({ position: e.position, ack: this.publish(e, previousId) });
            previousId = e.id;
          }
          while (pending.length > 0) await this.settle(pending.shift()!);
        } catch (err) {
          // The publishes after a failed one fail too (each expects its predecessor as the last
          // message); wait for all of them before starting over from JetStream's last message.
          await Promise.allSettled(pending.map((p) => p.ack));
          throw err;
        }
        resumeAfter = Math.max(resumeAfter, through);
        if (through > 0) {
          await cursor;
          const at = through;
          cursor = sub.ack(at).then(() => this.advance(at));
          // Awaited before the next page's write, or below.
          cursor.catch(() => undefined);
        }
      }
      await cursor;
    } finally {
      await cursor.catch(() => undefined);
      await sub.close().catch(() => undefined);
    }
  }

  private publish(e: RecordedEvent, previousId: string | null): Promise<PubAck> {
    const headers = writeEventHeaders(this.nats!.headers(), e);
    return this.js!.publish(this.subject, eventBody(e), {
      msgID: e.id,
      headers,
      timeout: this.timeoutMs,
      ...(previousId !== null && { expect: { lastMsgID: previousId } }),
    });
  }

  private async settle(p: Pending): Promise<void> {
    const ack = await p.ack;
    if (ack.duplicate) this.duplicates++;
    else this.published++;
  }

  private advance(position: number): void {
    this.position = Math.max(this.position, position);
    this.covered = Math.max(this.covered, position);
    this.settleWaiters();
  }

  private settleWaiters(): void {
    const done = this.state === 'failed' || this.state === 'stopped';
    this.waiters = this.waiters.filter((w) => {
      if (this.covered >= w.head) w.resolve();
      else if (done) w.reject(this.lastError ?? new IdemError('closed', `the relay is ${this.state}`));
      else return true;
      return false;
    });
  }

  private async closeConnection(): Promise<void> {
    const nc = this.nc;
    this.nc = null;
    if (nc && !this.options.connection) await nc.close().catch(() => undefined);
  }
}

/** Errors that starting over cannot fix: wrong configuration or another consumer's identity. */
function isFatal(err: unknown): boolean {
  return (
    isIdemError(err, 'invalid_input') ||
    isIdemError(err, 'consumer_identity_conflict') ||
    isIdemError(err, 'not_found') ||
    isIdemError(err, 'closed')
  );
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

function boundedInt(value: unknown, field: string, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1 || value > max)
    throw new InvalidInputError(field, `must be an integer from 1 to ${max}`);
  return value;
}
