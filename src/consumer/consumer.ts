import { ClosedError, IdemError, isIdemError } from '../core/errors.js';
import type { RecordedEvent } from '../core/event.js';
import type { ConsumerPause, Subscription } from '../core/subscription.js';
import { backoffDelay, sleep } from '../core/backoff.js';
import { traced, traceparentOf } from '../core/tracing.js';
import { idemStoreOf } from '../core/consumerSource.js';
import { ConsumerGroupMember } from './consumerGroup.js';
import { MessageBatcher, type Work } from './messageBatcher.js';
import { ConsumerMetrics, type ConsumerMetricsSnapshot, type ConsumerProgress } from './metrics.js';
import {
  phaseOf,
  stateOf,
  type Active,
  type ConsumerRuntimeStatus,
  type Lifecycle,
  type Run,
} from './lifecycle.js';
import {
  resolveOptions,
  type AnyEvents,
  type ConsumerOptions,
  type EventMap,
  type ResolvedOptions,
} from './options.js';
import { processBatch, type BatchOutcome } from './processBatch.js';
import { LedgerPruner } from './ledgerPruner.js';
import { SHRED_POLL_MS, ShredFollower } from './shredFollower.js';
import { OutageDetector } from './outageDetector.js';

export type { ConsumerRuntimeStatus, ConsumerState } from './lifecycle.js';

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

/** How often a consumer over a remote source reports its monitors to the server, at most. */
const REPORT_EVERY_MS = 2000;

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
  private readonly pruner: LedgerPruner<Tx>;
  private readonly shreds: ShredFollower<Tx>;
  /** Follows the shred log while the consumer owns its subscription and no batch runs. */
  private shredTimer: NodeJS.Timeout | null = null;
  private life: Lifecycle = { kind: 'created' };
  private progress: ConsumerProgress = { position: 0, head: 0, lagSeconds: 0 };
  private caughtUpAt = -1;
  private epoch = 0;
  /** The last error seen in the current run (a reconnect's cause, or why it stopped). */
  private lastError: Error | null = null;
  private batchInFlight: Promise<unknown> | null = null;
  private failures = 0;
  /**
   * The most events in the next catch-up transaction: `batch.catchUpSize`, halved (down to
   * `batch.size`) each time a batch fails with an error that ends the subscription (a lost
   * connection, a failed commit), doubled back after each batch that commits. A target whose
   * transactions are cut every few seconds then still commits, in smaller transactions.
   */
  private catchUpLimit: number;
  private lastHeadCheck = 0;
  private waiters = new Set<Waiter>();
  private lastReport = 0;
  private reportTimer: NodeJS.Timeout | null = null;
  /**
   * Events held (a version gap under `gaps: 'wait'`, a failure while an outage may be forming, and
   * their entities' later events): delivered again with the next batch, or once due.
   */
  private held: RecordedEvent[] = [];
  /** When each entity held for a version gap was first held. */
  private heldSince = new Map<string, number>();
  /**
   * Per subscription, stream -> the last delivered event that a park parked behind the stream's dead
   * letter (see `BatchDeps.parkedThrough`): a later batch may still hold such events (read ahead into
   * the batcher, or held), and must not handle them.
   */
  private readonly parkedThrough = new Map<string, number>();
  /** The position the runtime would have acknowledged but for the held events, and a caught-up marker seen meanwhile. */
  private withheld: { ack: number; caughtUp: number } = { ack: 0, caughtUp: -1 };
  /** Tells an outage from poison, when `onError.outage` is on. */
  private readonly detector: OutageDetector | null;

  constructor(options: ResolvedOptions<Tx>) {
    this.o = options;
    this.m = new ConsumerMetrics(this.o.name, this.o.metrics);
    this.pruner = new LedgerPruner(this.o, this.o.ledger);
    this.shreds = new ShredFollower(this.o);
    this.catchUpLimit = this.o.batch.catchUpSize;
    // A source that keeps no dead letters (JetStream) refuses to park: there is nothing to hold back.
    this.detector =
      options.onError.outage && idemStoreOf(options.source)
        ? new OutageDetector(options.onError.outage)
        : null;
  }

  get name(): string {
    return this.o.name;
  }

  /** True once `stop()` was called or the consumer ended: the loops wind down. */
  private get ending(): boolean {
    const k = this.life.kind;
    return k === 'stopping' || k === 'stopped' || k === 'failed';
  }

  /** Moves to `next` unless the consumer is ending (stopping wins over what the loop reports). */
  private enter(next: Active): void {
    if (!this.ending) this.life = next;
  }

  start(): Promise<void> {
    const life = this.life;
    if (life.kind === 'stopping') return life.stopped.then(() => this.start());
    if ('run' in life) return life.run.started;
    this.lastError = null;
    const run: Run = {
      started: Promise.resolve(),
      loop: null,
      sub: null,
      wakeUp: new AbortController(),
      subscribeAbort: new AbortController(),
    };
    this.life = { kind: 'starting', run, standby: false };
    run.started = this.doStart(run);
    return run.started;
  }

  private async doStart(run: Run): Promise<void> {
    try {
      await this.o.target.migrate();
      // Records the version's live point (effects of older events are suppressed) and starts the effect dispatcher, if any.
      await this.o.effects?.start();
      if (this.o.standby) this.enter({ kind: 'starting', run, standby: true });
      const sub = await this.subscribe(run);
      if (this.ending) {
        await sub.close();
        return;
      }
      run.loop = this.run(run, sub);
    } catch (err) {
      if (this.ending) return;
      this.finish('stopped', asError(err), null);
      throw err;
    }
  }

  private async subscribe(run: Run): Promise<Subscription> {
    const o = this.o;
    const sub = await o.source.subscribe(o.name, {
      filter: o.filter,
      from: o.from,
      batchSize: o.batch.size,
      // Room for a catch-up batch in its transaction plus the next one: on a source whose reads wait
      // on I/O (PostgreSQL) the next batch's pages are read while the current one commits.
      maxInFlight: Math.max(1000, 2 * o.batch.catchUpSize + 2 * o.batch.size),
      standby: o.standby,
      signal: run.subscribeAbort.signal,
      ...(o.leaseTtlMs !== undefined ? { leaseTtlMs: o.leaseTtlMs } : {}),
      ...(o.owner !== undefined ? { owner: o.owner } : {}),
    });
    run.sub = sub;
    try {
      await this.pruner.checkStart(sub.startPosition);
    } catch (err) {
      await this.closeQuietly(sub);
      throw err;
    }
    this.epoch = sub.epoch;
    this.followShreds();
    // A new subscription says again whether the consumer is paused.
    this.m.paused(false);
    this.enter({ kind: 'catching_up', run });
    this.setProgress(Math.max(this.progress.position, sub.startPosition), this.progress.head);
    this.report(run);
    return sub;
  }

  /** Once the consumer owns its subscription: follows the shred log now and every `SHRED_POLL_MS`. */
  private followShreds(): void {
    if (!this.shreds.enabled) return;
    void this.shreds.poll(true);
    this.shredTimer ??= setInterval(() => {
      if (this.batchInFlight === null && !this.ending) void this.shreds.poll();
    }, SHRED_POLL_MS);
    this.shredTimer.unref();
  }

  private stopFollowingShreds(): void {
    if (this.shredTimer) clearInterval(this.shredTimer);
    this.shredTimer = null;
  }

  private async run(run: Run, first: Subscription): Promise<void> {
    let sub: Subscription | null = first;
    while (!this.ending) {
      try {
        sub ??= await this.subscribe(run);
        const end = await this.consume(run, sub);
        if (end === 'failed') return;
        if (this.ending) break;
        // The source ended the subscription without being asked: reconnect (a closed store refuses then).
        throw new IdemError('unavailable', `the subscription of consumer "${this.o.name}" ended`);
      } catch (err) {
        const error = asError(err);
        if (this.ending) break;
        await this.closeQuietly(sub);
        sub = null;
        if (isIdemError(error) && TERMINAL.has(error.code)) {
          this.finish(error.code === 'fenced' ? 'stopped' : 'failed', error, null);
          return;
        }
        this.lastError = error;
        this.failures++;
        this.m.add('reconnects');
        this.enter({ kind: 'reconnecting', run });
        await sleep(
          backoffDelay(this.failures, this.o.reconnect.initialDelayMs, this.o.reconnect.maxDelayMs),
          run.wakeUp.signal,
        );
      }
    }
    await this.closeQuietly(sub);
  }

  private async consume(run: Run, sub: Subscription): Promise<'ended' | 'failed'> {
    const batcher = new MessageBatcher(sub[Symbol.asyncIterator](), {
      size: this.o.batch.size,
      maxWaitMs: this.o.batch.maxWaitMs,
      catchUpSize: () => this.catchUpLimit,
    });
    // A new subscription delivers again whatever was held; held failures are tried afresh.
    this.held = [];
    this.heldSince.clear();
    this.parkedThrough.clear();
    this.detector?.reset();
    this.withheld = { ack: 0, caughtUp: -1 };
    let pending: Promise<Work> | null = null;
    for (;;) {
      pending ??= batcher.next();
      const got = this.held.length > 0 ? await this.orHeldDue(pending) : await pending;
      let work: Work = { kind: 'events', events: [], redelivery: false };
      if (got !== 'held_due') {
        pending = null;
        work = got;
      }
      if (work.kind === 'end' || this.ending) return 'ended';
      if (work.kind === 'caught_up') {
        if (this.held.length > 0) {
          // Not caught up while events are held: the marker counts once they are handled.
          this.withheld.caughtUp = Math.max(this.withheld.caughtUp, work.position);
          continue;
        }
        await this.pruner.caughtUp();
        this.caughtUp(run, work.position);
        this.report(run);
        continue;
      }
      if (work.kind === 'paused') {
        this.pauseChanged(run, work.pause);
        continue;
      }
      const events = this.withHeld(work.events);
      if (events.length === 0) continue;
      // Fresh events come in position order: none at or below a stream's parked position is still to come.
      if (!work.redelivery)
        for (const [stream, through] of this.parkedThrough)
          if (through < events[0]!.position) this.parkedThrough.delete(stream);
      // A shred being followed finishes first: its transactions and a batch's never interleave.
      await this.shreds.idle();
      const batch = this.gatedEvents(run, sub, events, work.redelivery);
      this.batchInFlight = batch;
      try {
        const outcome = await batch.catch((err: unknown) => {
          this.catchUpLimit = Math.max(this.o.batch.size, Math.floor(this.catchUpLimit / 2));
          throw err;
        });
        if (outcome === 'ended') return 'ended';
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
      this.catchUpLimit = Math.min(this.o.batch.catchUpSize, 2 * this.catchUpLimit);
      await this.shreds.poll();
      if (this.held.length === 0 && this.withheld.caughtUp >= 0) {
        this.caughtUp(run, this.withheld.caughtUp);
        this.withheld.caughtUp = -1;
      }
      this.checkWaiters();
      this.report(run);
    }
  }

  /**
   * Sends the monitors to a remote source's server: at once when the last report is old enough,
   * else once that time has passed, so the last figures always arrive.
   */
  private report(run: Run): void {
    if (!run.sub?.report || this.reportTimer) return;
    const wait = this.lastReport + REPORT_EVERY_MS - Date.now();
    const send = (): void => {
      this.reportTimer = null;
      this.lastReport = Date.now();
      run.sub?.report?.(this.m.monitors(this.progress));
    };
    if (wait <= 0) send();
    else {
      this.reportTimer = setTimeout(send, wait);
      this.reportTimer.unref();
    }
  }

  private caughtUp(run: Run, position: number): void {
    this.caughtUpAt = Math.max(this.caughtUpAt, position);
    this.enter({ kind: 'live', run });
    this.setProgress(this.progress.position, Math.max(this.progress.head, position), 0);
    this.checkWaiters();
  }

  /** The delivered events with the held ones, in position order (each entity's in version order). */
  private withHeld(events: RecordedEvent[]): RecordedEvent[] {
    if (this.held.length === 0) return events;
    const all = [...this.held, ...events].sort((a, b) => a.position - b.position);
    this.held = [];
    return all;
  }

  /**
   * The next work, or `held_due` once the oldest entity held for a gap has waited `gapWaitMs` (its
   * gap is then recovered), or a held failure may be poison (it is then dead-lettered).
   */
  private async orHeldDue(next: Promise<Work>): Promise<Work | 'held_due'> {
    let dueAt = this.detector?.dueAt() ?? Infinity;
    for (const since of this.heldSince.values()) dueAt = Math.min(dueAt, since + this.o.gapWaitMs);
    if (dueAt === Infinity) return next;
    let timer: NodeJS.Timeout | undefined;
    const due = new Promise<'held_due'>((resolve) => {
      timer = setTimeout(() => resolve('held_due'), Math.max(0, dueAt - Date.now()));
    });
    try {
      return await Promise.race([next, due]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** `gaps: 'wait'`: hold `e` (its entity has a gap) unless its entity has waited `gapWaitMs` already. */
  private holdGap(e: RecordedEvent): boolean {
    const now = Date.now();
    const since = this.heldSince.get(e.stream) ?? now;
    this.heldSince.set(e.stream, since);
    return now - since < this.o.gapWaitMs;
  }

  /** `handleEvents` once the group member's gate lets this partition run a batch (at once without one). */
  private async gatedEvents(
    run: Run,
    sub: Subscription,
    events: RecordedEvent[],
    redelivery: boolean,
  ): Promise<BatchOutcome | 'ended'> {
    const gate = this.o.batchGate;
    if (!gate) return this.handleEvents(run, sub, events, redelivery);
    const leave = await gate.enter();
    try {
      // Stopped while waiting: the events stay unacknowledged, delivered again to the next owner.
      if (this.ending) return 'ended';
      return await this.handleEvents(run, sub, events, redelivery);
    } finally {
      leave();
    }
  }

  /** Runs a delivered batch; when its failures make an outage, rides the outage out and goes on after it. */
  private async handleEvents(
    run: Run,
    sub: Subscription,
    events: RecordedEvent[],
    redelivery: boolean,
  ): Promise<BatchOutcome | 'ended'> {
    let rest = events;
    for (;;) {
      const outcome = await this.runBatch(sub, rest, redelivery);
      if (!outcome.outage) return outcome;
      rest = rest.slice(rest.indexOf(outcome.outage.event));
      if (!(await this.rideOutage(run, sub, rest[0]!, redelivery, outcome.outage.error))) return 'ended';
      rest = rest.slice(1);
      if (rest.length === 0) return outcome;
    }
  }

  /**
   * An outage: shows `paused` (reason `outage`, stored too), then probes with the event it stopped
   * at, alone, once per probe delay, until it is handled. Then the entities dead-lettered in the
   * failure streak before the outage was recognised are retried (they were its victims, not poison),
   * and processing goes on. False when the consumer stops meanwhile.
   */
  private async rideOutage(
    run: Run,
    sub: Subscription,
    event: RecordedEvent,
    redelivery: boolean,
    error: Error,
  ): Promise<boolean> {
    const detector = this.detector!;
    const life = this.life;
    const was = life.kind === 'paused' ? life.was : this.caughtUpAt >= 0 ? 'live' : 'catching_up';
    this.lastError = error;
    this.enter({
      kind: 'paused',
      run,
      pause: { reason: 'outage', since: new Date().toISOString(), by: null },
      was,
    });
    this.m.paused(true);
    await sub.outage(true);
    const probe: ResolvedOptions<Tx> = {
      ...this.o,
      onError: { ...this.o.onError, attempts: 1, then: 'stop', outage: null },
    };
    for (let n = 1; ; n++) {
      await sleep(detector.probeDelay(n), run.wakeUp.signal);
      if (this.ending) return false;
      const outcome = await this.runBatch(sub, [event], redelivery, probe);
      if (!outcome.stop) break;
      this.lastError = outcome.stop.error;
    }
    await sub.outage(false);
    const store = idemStoreOf(this.o.source);
    if (store) for (const stream of detector.parked) await store.deadLetters.retry(this.o.name, { stream });
    detector.succeeded();
    this.enter({ kind: was, run });
    this.m.paused(false);
    return true;
  }

  private async runBatch(
    sub: Subscription,
    events: RecordedEvent[],
    redelivery: boolean,
    options: ResolvedOptions<Tx> = this.o,
  ): Promise<BatchOutcome> {
    // One delivery span per batch, in the trace of its first traced event, linked to the others'.
    const traces = events.map((e) => traceparentOf(e.metadata)).filter((t) => t !== undefined);
    return traced(
      'idem.deliver',
      {
        kind: 'consumer',
        parent: traces[0],
        links: traces.slice(1),
        attributes: {
          'idem.consumer': this.o.name,
          'idem.events': events.length,
          'idem.position.first': events[0]!.position,
          'idem.position.last': events[events.length - 1]!.position,
          'idem.redelivery': redelivery,
        },
      },
      async (span) => {
        const outcome = await this.handleBatch(sub, events, redelivery, span.traceparent, options);
        span.setAttributes({
          'idem.outcome': outcome.stop ? 'stop' : 'acknowledged',
          'idem.ack': outcome.ackPosition ?? -1,
        });
        return outcome;
      },
    );
  }

  private async handleBatch(
    sub: Subscription,
    events: RecordedEvent[],
    redelivery: boolean,
    traceparent: string | undefined,
    options: ResolvedOptions<Tx>,
  ): Promise<BatchOutcome> {
    this.m.add('delivered', events.length);
    const outcome = await processBatch(
      {
        options,
        epoch: sub.epoch,
        park: (position, info) => sub.park(position, info),
        parkedThrough: this.parkedThrough,
        traceparent,
        outage: options === this.o ? this.detector : null,
        heldFrom: this.held.reduce((min, e) => Math.min(min, e.position), Infinity),
        prune: this.pruner.inTransaction,
        ...(this.o.gaps === 'wait' && { holdGap: (e: RecordedEvent) => this.holdGap(e) }),
      },
      events,
      redelivery,
    );
    let ackPosition = outcome.ackPosition;
    if (this.o.gaps === 'wait' || this.detector) ackPosition = this.afterHolding(events, outcome);
    const now = Date.now();
    const t = outcome.tally;
    this.m.add('batches', t.transactions);
    this.m.add('processed', t.processed);
    this.m.add('duplicates', t.duplicates);
    this.m.add('gaps', t.gaps);
    this.m.add('recovered', t.recovered);
    this.m.add('deadLetters', t.deadLetters);
    this.m.add('parked', t.parked);
    this.m.entities(t.handledStreams, t.parkedStreams);
    for (const s of t.handlerSeconds) this.m.handlerSeconds(s);
    for (const ms of t.recordedAtMs) this.m.endToEndSeconds(Math.max(0, now - ms) / 1000);
    const last = events[events.length - 1]!;
    if (ackPosition !== null) {
      await sub.ack(ackPosition);
      await this.pruner.acked(
        ackPosition,
        t.processed,
        Date.parse(last.recordedAt),
        ackPosition < this.progress.head,
      );
    }
    this.setProgress(
      Math.max(this.progress.position, ackPosition ?? 0),
      this.progress.head,
      Math.max(0, now - Date.parse(last.recordedAt)) / 1000,
    );
    if (now - this.lastHeadCheck > 1000) {
      this.lastHeadCheck = now;
      void this.o.source.headPosition().then(
        (head) => this.setProgress(this.progress.position, head),
        () => undefined,
      );
    }
    return outcome;
  }

  /** Shows the pause the subscription reported (an operator's), or its end. */
  private pauseChanged(run: Run, pause: ConsumerPause | null): void {
    const life = this.life;
    if (pause) {
      const was = life.kind === 'paused' ? life.was : this.caughtUpAt >= 0 ? 'live' : 'catching_up';
      this.enter({ kind: 'paused', run, pause, was });
    } else if (life.kind === 'paused') this.enter({ kind: life.was, run });
    this.m.paused(pause !== null);
  }

  /**
   * Keeps the events the batch held, and says what to acknowledge: nothing at or after a held event
   * while any is held; once none is, everything the batches committed meanwhile.
   */
  private afterHolding(events: RecordedEvent[], outcome: BatchOutcome): number | null {
    // The batch had the held events (merged into it), except while an outage is ridden out: then the
    // runtime may still hold events from before the outage's first event.
    for (const e of outcome.held) this.held.push(e);
    if (this.heldSince.size > 0) {
      const streams = new Set(this.held.map((e) => e.stream));
      for (const s of this.heldSince.keys()) if (!streams.has(s)) this.heldSince.delete(s);
    }
    if (outcome.stop) return outcome.ackPosition;
    // The events from the outage's first event on are handled after it: what was withheld is
    // acknowledged with them, not before.
    if (outcome.outage) this.withheld.ack = 0;
    if (this.held.length > 0) {
      this.withheld.ack = Math.max(this.withheld.ack, events[events.length - 1]!.position);
      return outcome.ackPosition;
    }
    const ack = Math.max(outcome.ackPosition ?? 0, this.withheld.ack);
    this.withheld.ack = 0;
    return ack > 0 ? ack : null;
  }

  /** Records the acknowledged position and the head (never below it), and sets the gauges. */
  private setProgress(position: number, head: number, lagSeconds = this.progress.lagSeconds): void {
    const top = Math.max(head, position);
    this.progress = { position, head: top, lagSeconds: top > position ? lagSeconds : 0 };
    this.m.gauges(this.progress, this.o.metrics ? this.o.source.metrics?.() : undefined);
  }

  stop(): Promise<void> {
    const life = this.life;
    if (life.kind === 'stopping') return life.stopped;
    if (!('run' in life)) return this.o.effects?.stop() ?? Promise.resolve();
    const stopping: Extract<Lifecycle, { kind: 'stopping' }> = {
      kind: 'stopping',
      run: life.run,
      was: stateOf(life) === 'running' ? 'running' : 'idle',
      stopped: Promise.resolve(),
      failed: null,
    };
    this.life = stopping;
    stopping.stopped = this.doStop(stopping);
    return stopping.stopped;
  }

  private async doStop(stopping: Extract<Lifecycle, { kind: 'stopping' }>): Promise<void> {
    const run = stopping.run;
    if (this.reportTimer) clearTimeout(this.reportTimer);
    this.reportTimer = null;
    this.stopFollowingShreds();
    await this.o.effects?.stop();
    run.wakeUp.abort();
    if (this.batchInFlight) await this.batchInFlight.catch(() => undefined);
    await this.shreds.idle();
    // Best effort: after a failure here the consumer's start still checks the target's horizon.
    await this.pruner.stopping().catch(() => undefined);
    run.subscribeAbort.abort();
    await this.closeQuietly(run.sub);
    await run.started.catch(() => undefined);
    await run.loop;
    this.life = stopping.failed ? { kind: 'failed', event: stopping.failed.event } : { kind: 'stopped' };
    this.rejectWaiters();
  }

  private async closeQuietly(sub: Subscription | null): Promise<void> {
    if (!sub) return;
    try {
      await sub.close();
    } catch {
      // The subscription is gone either way; closing is best effort.
    }
  }

  /** Ends the run: stopped or failed (when stopping, once the stop is done). */
  private finish(kind: 'stopped' | 'failed', error: Error | null, event: RecordedEvent | null): void {
    const life = this.life;
    if (error) this.lastError = error;
    this.stopFollowingShreds();
    if (life.kind === 'stopping') {
      if (kind === 'failed' && error) life.failed = { error, event };
    } else {
      if ('run' in life) life.run.wakeUp.abort();
      this.life = kind === 'failed' ? { kind, event } : { kind };
    }
    this.rejectWaiters();
  }

  private rejectWaiters(): void {
    const reason = this.lastError ?? new ClosedError(`consumer "${this.o.name}"`);
    for (const w of this.waiters) w.reject(reason);
    this.waiters.clear();
  }

  status(): ConsumerRuntimeStatus {
    const life = this.life;
    const s: ConsumerRuntimeStatus = {
      name: this.o.name,
      state: stateOf(life),
      phase: phaseOf(life),
      position: this.progress.position,
      epoch: this.epoch,
    };
    // A failing shred follow (its source or `onShred`) shows here until a follow succeeds.
    const e = this.lastError ?? this.shreds.lastError;
    if (e) {
      s.lastError = { name: e.name, message: e.message, ...(isIdemError(e) ? { code: e.code } : {}) };
    }
    if (life.kind === 'paused') s.pause = { ...life.pause };
    if (life.kind === 'failed' && life.event)
      s.failedEvent = { ...pick(life.event), metadata: life.event.metadata };
    return s;
  }

  metrics(): ConsumerMetricsSnapshot {
    const snapshot = this.m.snapshot(this.progress);
    const source = this.o.source.metrics?.();
    return source ? { ...snapshot, source } : snapshot;
  }

  async whenCaughtUp(options: { timeoutMs?: number } = {}): Promise<void> {
    const head = await this.o.source.headPosition();
    this.setProgress(this.progress.position, head);
    if (this.life.kind === 'failed' || this.life.kind === 'stopped') {
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
      const acked = this.progress.position;
      const ok =
        acked >= w.head || this.caughtUpAt >= w.head || (w.lastMatching !== null && acked >= w.lastMatching);
      if (ok) {
        this.waiters.delete(w);
        w.resolve();
      } else if (this.caughtUpAt >= 0 && w.lastMatching === null && !w.scanning && this.o.source.readAll) {
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
    const read = this.o.source.readAll?.bind(this.o.source);
    if (!read) return head;
    for await (const e of read({ after: this.progress.position, filter: this.o.filter })) {
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
export function createConsumer<Tx, M extends EventMap = AnyEvents>(
  options: ConsumerOptions<Tx, M>,
): Consumer {
  const o = resolveOptions(options);
  if (o.partitions !== null) return new ConsumerGroupMember(o, (partition) => new ConsumerRuntime(partition));
  return new ConsumerRuntime(o);
}
