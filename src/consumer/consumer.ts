import { ClosedError, IdemError, isIdemError } from '../core/errors.js';
import type { RecordedEvent } from '../core/event.js';
import type { Subscription } from '../core/subscription.js';
import { backoffDelay, sleep } from './backoff.js';
import { MessageBatcher } from './messageBatcher.js';
import { ConsumerMetrics, type ConsumerMetricsSnapshot } from './metrics.js';
import { resolveOptions, type ConsumerOptions, type ResolvedOptions } from './options.js';
import { processBatch, type BatchOutcome } from './processBatch.js';

/**
 * - `idle`: created, or waiting for ownership (standby) or to reconnect;
 * - `running`: owns the consumer and processes events;
 * - `stopped`: `stop()` was called, or ownership was lost to another process (`lastError` says so);
 * - `failed`: stopped on an error (`then: 'stop'`, `gaps: 'fail'`, identity conflict...).
 */
export type ConsumerState = 'idle' | 'running' | 'stopped' | 'failed';

export interface ConsumerRuntimeStatus {
  name: string;
  state: ConsumerState;
  /** What the consumer is doing inside its state. */
  phase: 'created' | 'starting' | 'standby' | 'catching_up' | 'live' | 'reconnecting' | 'stopping' | 'done';
  /** Last acknowledged position. */
  position: number;
  /** The ownership epoch of the current (or last) subscription; 0 before the first. */
  epoch: number;
  lastError?: { name: string; message: string; code?: string };
  /** The event the consumer stopped at, when it failed on one. */
  failedEvent?: Pick<RecordedEvent, 'id' | 'stream' | 'version' | 'position' | 'type' | 'metadata'>;
}

export interface Consumer {
  readonly name: string;
  /**
   * Migrates the target, takes ownership of the consumer and starts processing in the background.
   * Rejects with `consumer_busy` or `consumer_identity_conflict` when it cannot own the identity; with
   * `standby: true` it waits until it owns it instead (and resolves without error if stopped meanwhile).
   */
  start(): Promise<void>;
  /** Finishes the batch in flight (commit, ack), then releases the lease. Safe to call twice. */
  stop(): Promise<void>;
  status(): ConsumerRuntimeStatus;
  metrics(): ConsumerMetricsSnapshot;
  /** Resolves once everything up to the source's head at call time is committed and acknowledged; rejects if the consumer stops or fails first. */
  whenCaughtUp(options?: { timeoutMs?: number }): Promise<void>;
}

interface Waiter {
  head: number;
  /** The last event up to `head` that the filter matches, once looked up (null before). */
  lastMatching: number | null;
  scanning: boolean;
  resolve: () => void;
  reject: (err: Error) => void;
}

/** Errors after which reconnecting cannot help. */
const TERMINAL = new Set([
  'fenced',
  'consumer_identity_conflict',
  'closed',
  'invalid_input',
  'not_found',
  'unauthorized',
  'forbidden',
  // An upcaster that fails on an event fails on it again after a reconnect.
  'upcast_failed',
]);

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

class ConsumerRuntime<Tx> implements Consumer {
  private readonly o: ResolvedOptions<Tx>;
  private readonly m: ConsumerMetrics;
  private state: ConsumerState = 'idle';
  private phase: ConsumerRuntimeStatus['phase'] = 'created';
  private acked = 0;
  private caughtUpAt = -1;
  private epoch = 0;
  private lastError: Error | null = null;
  private failedEvent: RecordedEvent | null = null;
  private sub: Subscription | null = null;
  private stopping = false;
  private stopPromise: Promise<void> | null = null;
  private startPromise: Promise<void> | null = null;
  private loop: Promise<void> | null = null;
  private batchInFlight: Promise<unknown> | null = null;
  private wakeUp = new AbortController();
  private subscribeAbort = new AbortController();
  private failures = 0;
  private lastHeadCheck = 0;
  private waiters = new Set<Waiter>();

  constructor(options: ConsumerOptions<Tx>) {
    this.o = resolveOptions(options);
    this.m = new ConsumerMetrics(this.o.name, this.o.metrics);
  }

  get name(): string {
    return this.o.name;
  }

  start(): Promise<void> {
    if (this.startPromise && !this.stopping && this.state !== 'failed' && this.state !== 'stopped')
      return this.startPromise;
    this.stopping = false;
    this.stopPromise = null;
    this.lastError = null;
    this.failedEvent = null;
    this.wakeUp = new AbortController();
    this.subscribeAbort = new AbortController();
    this.state = 'idle';
    this.phase = 'starting';
    this.startPromise = this.doStart();
    return this.startPromise;
  }

  private async doStart(): Promise<void> {
    try {
      await this.o.target.migrate();
      // Records the version's live point (effects of older events are suppressed) and starts the effect dispatcher, if any.
      await this.o.effects?.start();
      if (this.o.standby) this.phase = 'standby';
      const sub = await this.subscribe();
      if (this.stopping) {
        await sub.close();
        return;
      }
      this.loop = this.run(sub);
    } catch (err) {
      if (this.stopping) return;
      this.finish('stopped', asError(err), null);
      throw err;
    }
  }

  private async subscribe(): Promise<Subscription> {
    const o = this.o;
    const sub = await o.source.subscribe(o.name, {
      filter: o.filter,
      from: o.from,
      batchSize: o.batch.size,
      // Room for a catch-up batch in its transaction plus the next one: on a source whose reads wait
      // on I/O (PostgreSQL) the next batch's pages are read while the current one commits.
      maxInFlight: Math.max(1000, 2 * o.batch.catchUpSize + 2 * o.batch.size),
      standby: o.standby,
      signal: this.subscribeAbort.signal,
      ...(o.leaseTtlMs !== undefined ? { leaseTtlMs: o.leaseTtlMs } : {}),
      ...(o.owner !== undefined ? { owner: o.owner } : {}),
    });
    this.sub = sub;
    this.epoch = sub.epoch;
    this.acked = Math.max(this.acked, sub.startPosition);
    this.state = 'running';
    this.phase = 'catching_up';
    this.m.progress(this.acked, this.m.head, this.m.lagSeconds);
    return sub;
  }

  private async run(first: Subscription): Promise<void> {
    let sub: Subscription | null = first;
    while (!this.stopping) {
      try {
        sub ??= await this.subscribe();
        const end = await this.consume(sub);
        if (end === 'failed') return;
        if (this.stopping) break;
        // The source ended the subscription without being asked: reconnect (a closed store refuses then).
        throw new IdemError('unavailable', `the subscription of consumer "${this.o.name}" ended`);
      } catch (err) {
        const error = asError(err);
        if (this.stopping) break;
        await this.closeQuietly(sub);
        sub = null;
        if (isIdemError(error) && TERMINAL.has(error.code)) {
          this.finish(error.code === 'fenced' ? 'stopped' : 'failed', error, null);
          return;
        }
        this.lastError = error;
        this.failures++;
        this.m.add('reconnects');
        this.state = 'idle';
        this.phase = 'reconnecting';
        await sleep(
          backoffDelay(this.failures, this.o.reconnect.initialDelayMs, this.o.reconnect.maxDelayMs),
          this.wakeUp.signal,
        );
      }
    }
    await this.closeQuietly(sub);
    this.finish('stopped', null, null);
  }

  private async consume(sub: Subscription): Promise<'ended' | 'failed'> {
    const batcher = new MessageBatcher(sub[Symbol.asyncIterator](), this.o.batch);
    for (;;) {
      const work = await batcher.next();
      if (work.kind === 'end' || this.stopping) return 'ended';
      if (work.kind === 'caught_up') {
        this.caughtUpAt = Math.max(this.caughtUpAt, work.position);
        this.phase = 'live';
        this.m.progress(this.acked, Math.max(this.m.head, work.position), 0);
        this.checkWaiters();
        continue;
      }
      if (work.events.length === 0) continue;
      const batch = this.runBatch(sub, work.events, work.redelivery);
      this.batchInFlight = batch;
      try {
        const outcome = await batch;
        if (outcome.stop) {
          await sub.fail({
            error: {
              name: outcome.stop.error.name,
              message: outcome.stop.error.message,
              ...(outcome.stop.error.stack ? { stack: outcome.stop.error.stack } : {}),
            },
            event: pick(outcome.stop.event),
          });
          this.finish('failed', outcome.stop.error, outcome.stop.event);
          return 'failed';
        }
      } finally {
        this.batchInFlight = null;
      }
      this.failures = 0;
      this.checkWaiters();
    }
  }

  private async runBatch(
    sub: Subscription,
    events: RecordedEvent[],
    redelivery: boolean,
  ): Promise<BatchOutcome> {
    this.m.add('delivered', events.length);
    const outcome = await processBatch(
      { options: this.o, epoch: sub.epoch, park: (position, info) => sub.park(position, info) },
      events,
      redelivery,
    );
    const now = Date.now();
    const t = outcome.tally;
    this.m.add('batches');
    this.m.add('processed', t.processed);
    this.m.add('duplicates', t.duplicates);
    this.m.add('gaps', t.gaps);
    this.m.add('recovered', t.recovered);
    this.m.add('deadLetters', t.deadLetters);
    this.m.add('parked', t.parked);
    if (this.m.parkedStreams.size > 0) for (const s of t.handledStreams) this.m.parkedStreams.delete(s);
    for (const s of t.parkedStreams) this.m.parkedStreams.add(s);
    for (const s of t.handlerSeconds) this.m.handlerSeconds(s);
    for (const ms of t.recordedAtMs) this.m.endToEndSeconds(Math.max(0, now - ms) / 1000);
    if (outcome.ackPosition !== null) {
      await sub.ack(outcome.ackPosition);
      if (outcome.ackPosition > this.acked) this.acked = outcome.ackPosition;
    }
    const last = events[events.length - 1]!;
    this.m.progress(this.acked, this.m.head, Math.max(0, now - Date.parse(last.recordedAt)) / 1000);
    if (now - this.lastHeadCheck > 1000) {
      this.lastHeadCheck = now;
      void this.o.source.headPosition().then(
        (head) => this.m.progress(this.acked, head, this.m.lagSeconds),
        () => undefined,
      );
    }
    return outcome;
  }

  async stop(): Promise<void> {
    this.stopPromise ??= this.doStop();
    return this.stopPromise;
  }

  private async doStop(): Promise<void> {
    await this.o.effects?.stop();
    if (this.state === 'stopped' || this.state === 'failed' || this.phase === 'created') return;
    this.stopping = true;
    this.phase = 'stopping';
    this.wakeUp.abort();
    if (this.batchInFlight) await this.batchInFlight.catch(() => undefined);
    this.subscribeAbort.abort();
    await this.closeQuietly(this.sub);
    await this.startPromise?.catch(() => undefined);
    await this.loop;
    this.finish('stopped', this.lastError, null);
  }

  private async closeQuietly(sub: Subscription | null): Promise<void> {
    if (!sub) return;
    try {
      await sub.close();
    } catch {
      // The subscription is gone either way; closing is best effort.
    }
  }

  private finish(state: 'stopped' | 'failed', error: Error | null, event: RecordedEvent | null): void {
    this.state = state;
    this.phase = 'done';
    if (error) this.lastError = error;
    if (event) this.failedEvent = event;
    this.stopping = true;
    this.wakeUp.abort();
    const reason = error ?? new ClosedError(`consumer "${this.o.name}"`);
    for (const w of this.waiters) w.reject(reason);
    this.waiters.clear();
  }

  status(): ConsumerRuntimeStatus {
    const s: ConsumerRuntimeStatus = {
      name: this.o.name,
      state: this.state,
      phase: this.phase,
      position: this.acked,
      epoch: this.epoch,
    };
    if (this.lastError) {
      const e = this.lastError;
      s.lastError = { name: e.name, message: e.message, ...(isIdemError(e) ? { code: e.code } : {}) };
    }
    if (this.failedEvent) s.failedEvent = { ...pick(this.failedEvent), metadata: this.failedEvent.metadata };
    return s;
  }

  metrics(): ConsumerMetricsSnapshot {
    return this.m.snapshot();
  }

  async whenCaughtUp(options: { timeoutMs?: number } = {}): Promise<void> {
    const head = await this.o.source.headPosition();
    this.m.progress(this.acked, head, this.m.lagSeconds);
    if (this.state === 'failed' || (this.state === 'stopped' && this.phase === 'done')) {
      throw this.lastError ?? new ClosedError(`consumer "${this.o.name}"`);
    }
    let waiter!: Waiter;
    const done = new Promise<void>((resolve, reject) => {
      waiter = { head, lastMatching: null, scanning: false, resolve, reject };
    });
    this.waiters.add(waiter);
    this.checkWaiters();
    if (options.timeoutMs === undefined) return done;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new IdemError(
              'unavailable',
              `consumer "${this.o.name}" did not catch up with position ${head} within ${options.timeoutMs} ms`,
            ),
          ),
        options.timeoutMs,
      );
    });
    try {
      await Promise.race([done, timeout]);
    } finally {
      clearTimeout(timer);
      this.waiters.delete(waiter);
    }
  }

  private checkWaiters(): void {
    if (this.batchInFlight) return;
    for (const w of this.waiters) {
      const ok =
        this.acked >= w.head ||
        this.caughtUpAt >= w.head ||
        (w.lastMatching !== null && this.acked >= w.lastMatching);
      if (ok) {
        this.waiters.delete(w);
        w.resolve();
      } else if (this.caughtUpAt >= 0 && w.lastMatching === null && !w.scanning) {
        // Live, but behind the waiter's head: the source delivers only matching events, so find the
        // last one up to the head; once it is acknowledged, everything up to the head is.
        w.scanning = true;
        void this.lastMatching(w.head).then(
          (last) => {
            w.lastMatching = last;
            this.checkWaiters();
          },
          (err: unknown) => {
            this.waiters.delete(w);
            w.reject(asError(err));
          },
        );
      }
    }
  }

  private async lastMatching(head: number): Promise<number> {
    let last = 0;
    for await (const e of this.o.source.readAll({ after: this.acked, filter: this.o.filter })) {
      if (e.position > head) break;
      last = e.position;
    }
    return last;
  }
}

function pick(e: RecordedEvent): Pick<RecordedEvent, 'id' | 'stream' | 'version' | 'position' | 'type'> {
  return { id: e.id, stream: e.stream, version: e.version, position: e.position, type: e.type };
}

/** Creates an idempotent consumer: see `ConsumerOptions` and docs/consumers.md. Nothing runs before `start()`. */
export function createConsumer<Tx>(options: ConsumerOptions<Tx>): Consumer {
  return new ConsumerRuntime(options);
}
