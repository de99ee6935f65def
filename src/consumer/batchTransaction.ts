import type { TargetTransaction } from '../core/consumerTarget.js';
import type { RecordedEvent } from '../core/event.js';
import { matchesFilter } from '../core/filter.js';
import type { ParkInfo, ParkResult } from '../core/subscription.js';
import { backoffDelay } from '../core/backoff.js';
import { BatchPlan, keysOf, planGap } from './batchPlan.js';
import { BatchRecorder, type BatchTally } from './batchRecorder.js';
import { Invoker, type Isolate, type Pending } from './invoker.js';
import type { ResolvedOptions } from './options.js';
import type { OutageDetector } from './outageDetector.js';

/** What the runtime needs from the subscription while a batch's transaction is open. */
export interface BatchDeps<Tx> {
  options: ResolvedOptions<Tx>;
  epoch: number;
  /** Dead-letters a delivered event (before the commit, so a crash can never skip it). */
  park(position: number, info: ParkInfo): Promise<ParkResult>;
  /**
   * Stream -> the last of its delivered events that a park of this subscription parked behind a dead
   * letter (`ParkResult.parkedThrough`), kept by the runtime across batches: such an event reaching a
   * later batch (it was delivered before the park) is not handled. The batch's parks add to it.
   */
  parkedThrough?: Map<string, number>;
  /** The delivery span's traceparent: the handler and commit spans are its children. */
  traceparent?: string | undefined;
  /** Under `gaps: 'wait'`: true while an event with a version gap is to be held, not recovered yet. */
  holdGap?(e: RecordedEvent): boolean;
  /** Outage detection, when on: told of every event handled and of every event failing for good; holds failures. */
  outage?: OutageDetector | null;
  /** The first position the runtime holds outside this batch (Infinity for none): nothing from it on is checkpointed. */
  heldFrom?: number;
  /** Runs in each of the batch's transactions after its record: a due ledger prune (see `LedgerPruner`). */
  prune?: (t: TargetTransaction<Tx>) => Promise<void>;
}

/** A failed try of one event in an earlier transaction of the batch. */
export interface Tried {
  /** Attempts used. */
  attempts: number;
  error: Error;
  /** True once the backoff before the next attempt has passed. */
  waited: boolean;
}

/** An event whose attempts are used up (or that cannot be handled at all). */
interface Failure {
  kind: 'failed';
  error: Error;
  attempts: number;
  /** Stops the consumer whatever `onError.then` says (a gap under `gaps: 'fail'`). */
  fatal: boolean;
}

/** An event to try again after `delayMs`, in a later transaction: the backoff never holds one open. */
export interface Later {
  kind: 'later';
  position: number;
  attempts: number;
  error: Error;
  delayMs: number;
}

/** What is left of a delivered batch for its next transaction. */
export interface Remaining {
  events: RecordedEvent[];
  redelivery: boolean;
  /** null on the fast path; then the events that failed in an earlier transaction, by position. */
  tried: ReadonlyMap<number, Tried> | null;
  /** Streams parked by earlier transactions of the batch. */
  parkedBehind: ReadonlySet<string>;
  /** The first position held so far (by the runtime or an earlier transaction of the batch): never checkpointed or acknowledged. */
  heldFrom: number;
}

/** How handling one event went: null once it is handled. */
type Step = null | Failure | Later | Isolate;

/** A transaction that committed: the events before `retry.resumeAt` (or all of them) are done. */
export interface Committed {
  kind: 'committed';
  /** The position to acknowledge after the commit, or null for none. */
  ackPosition: number | null;
  /** Set when the consumer must stop at this event (cursor stays before it). */
  stop: { error: Error; event: RecordedEvent } | null;
  /** Set when failures at this event make an outage: it is not dead-lettered; the cursor stays before it. */
  outage: { error: Error; event: RecordedEvent } | null;
  /** Set when an event waits for its next attempt: the events from `resumeAt` on run in a later transaction. */
  retry: (Later & { resumeAt: number }) | null;
  tally: BatchTally;
  parkedBehind: ReadonlySet<string>;
  /**
   * Events held for a version gap (`gaps: 'wait'`) or for a failure while an outage may be forming,
   * with their entities' later ones: not handled, not acknowledged.
   */
  held: RecordedEvent[];
}

function failed(error: Error, attempts: number, fatal = false): Failure {
  return { kind: 'failed', error, attempts, fatal };
}

/**
 * One transaction of a delivered batch: the plan, then the handler per new event (or the batch
 * handler on the staged events), then ledger rows, entity versions, checkpoint and parks. Without
 * `tried` it is the fast path (no savepoints); a failing handler then asks for `Isolate`, and the
 * batch runs again with `tried`: `handle` in a savepoint per event, `handleBatch` bisected.
 */
export class BatchTransaction<Tx> {
  private readonly o: ResolvedOptions<Tx>;
  private readonly record: BatchRecorder;
  private readonly invoker: Invoker<Tx>;
  /** Events staged for the batch handler, handled together by `flush`. */
  private pending: Pending[] = [];
  /** Held failures found to be poison: their last attempt, by position. */
  private readonly lastTries = new Map<number, Tried>();

  private readonly events: RecordedEvent[];
  private readonly tried: ReadonlyMap<number, Tried> | null;
  private readonly redelivery: boolean;
  private readonly heldFrom: number;

  private constructor(
    private readonly deps: BatchDeps<Tx>,
    private readonly t: TargetTransaction<Tx>,
    private readonly plan: BatchPlan,
    rest: Remaining,
  ) {
    this.o = deps.options;
    this.events = rest.events;
    this.tried = rest.tried;
    this.redelivery = rest.redelivery;
    this.heldFrom = rest.heldFrom;
    this.record = new BatchRecorder(rest.parkedBehind);
    this.invoker = new Invoker(this.o, t, rest.redelivery, this.record);
  }

  /** Plans and executes the rest of the batch in `t`; resolves to `Isolate` when `t` must roll back. */
  static async run<Tx>(
    deps: BatchDeps<Tx>,
    t: TargetTransaction<Tx>,
    rest: Remaining,
  ): Promise<Committed | Isolate> {
    const plan = await BatchPlan.read(t, deps.options, deps.epoch, rest.events, rest.redelivery);
    return new BatchTransaction(deps, t, plan, rest).execute();
  }

  private async execute(): Promise<Committed | Isolate> {
    const { plan, record, events } = this;
    const tally = record.tally;
    tally.duplicates += events.length - plan.fresh.length;
    let stop: Committed['stop'] = null;
    let outage: Committed['outage'] = null;
    /** Events dead-lettered in this transaction, by index in `fresh`: parked at its end. */
    const lettered: { index: number; event: RecordedEvent }[] = [];
    let retry: Committed['retry'] = null;
    let ackIndex = events.length - 1;
    const held: RecordedEvent[] = [];
    const heldStreams = new Set<string>();
    let firstHeld = events.length;
    /** Index in `fresh` of the first event held for a failure: an outage's probe starts there at the latest. */
    let failHeld = Infinity;
    const hold = (i: number, e: RecordedEvent): void => {
      held.push(e);
      heldStreams.add(e.stream);
      firstHeld = Math.min(firstHeld, plan.start + i);
    };
    const detector = this.deps.outage ?? null;
    for (let i = 0; i < plan.fresh.length; i++) {
      const e = plan.fresh[i]!;
      if (record.parkedBehind.has(e.stream) || this.parkedEarlier(e)) {
        // Not handled: parking the blocker parks the stream's later delivered events behind it.
        tally.parked++;
        continue;
      }
      if (heldStreams.has(e.stream)) {
        held.push(e);
        continue;
      }
      const keys = plan.keys[i]!;
      // A failure held while an outage may be forming is not tried again: it waits until it is poison.
      const prior = detector?.heldFailure(e) ?? null;
      if (prior && !prior.poison) {
        failHeld = Math.min(failHeld, i);
        hold(i, e);
        continue;
      }
      // Found to be poison: dead-lettered with the failure it had; after a streak of several
      // entities, only once one last attempt fails too (their shared cause may have passed).
      if (prior?.shared)
        this.lastTries.set(e.position, {
          attempts: this.o.onError.attempts - 1,
          error: prior.error,
          waited: true,
        });
      let step: Step;
      if (prior && !prior.shared) step = failed(prior.error, prior.attempts);
      else if (!Array.isArray(keys)) step = failed(keys, 0);
      else if (plan.isDuplicate(e, keys)) {
        tally.duplicates++;
        continue;
      } else if (plan.hasGap(e) && this.deps.holdGap?.(e)) {
        // The missing versions may still arrive: the entity waits, the others go on.
        hold(i, e);
        continue;
      } else {
        step = plan.hasGap(e) ? await this.recoverGap(e) : null;
        if (!step) {
          const r = this.apply(e, keys, false);
          step = r instanceof Promise ? await r : r;
        }
      }
      if (!step) continue;
      if (step.kind === 'isolate') return step;
      if (step.kind === 'later') {
        retry = { ...step, resumeAt: plan.start + i };
        ackIndex = plan.start + i - 1;
        break;
      }
      if (this.o.onError.then === 'dead-letter' && !step.fatal) {
        // A held failure that failed its last attempt is dead-lettered; it was counted when it failed.
        const verdict = prior || !detector ? 'park' : detector.failed(e.stream);
        if (verdict === 'outage') {
          // The events held or dead-lettered earlier in this transaction are not parked after all:
          // the cursor stays before the first of them, and the probe starts with it.
          const first = Math.min(i, failHeld, lettered[0]?.index ?? Infinity);
          outage = { error: step.error, event: plan.fresh[first]! };
          ackIndex = plan.start + first - 1;
          // The events from there on are handled after the outage, not delivered again with the next batch.
          const from = outage.event.position;
          held.splice(0, held.length, ...held.filter((h) => h.position < from));
          record.parks.length = 0;
          tally.deadLetters = 0;
          tally.parked = 0;
          break;
        }
        // A redelivered event (a dead letter retried or redriven) may be behind the checkpoint: it is
        // never held (the next delivery would take it for a duplicate), it is parked again.
        if (verdict === 'hold' && !this.redelivery) {
          detector!.hold(e, step.error, step.attempts);
          failHeld = Math.min(failHeld, i);
          hold(i, e);
          continue;
        }
        lettered.push({ index: i, event: e });
        record.deadLetter(e, step.error, Math.max(1, step.attempts), this.o.onError.redrive);
        continue;
      }
      stop = { error: step.error, event: e };
      ackIndex = plan.start + i - 1;
      break;
    }
    const flushed = await this.flush();
    if (flushed) return flushed;
    // Nothing at or after a held event is acknowledged (or checkpointed) until it is handled.
    ackIndex = Math.min(ackIndex, firstHeld - 1);
    while (ackIndex >= 0 && events[ackIndex]!.position >= this.heldFrom) ackIndex--;
    const ackPosition = ackIndex >= 0 ? events[ackIndex]!.position : null;
    await this.t.record(this.o.targetName, {
      entries: record.entries,
      versions: plan.versions,
      position: Math.max(plan.checkpoint, ackPosition ?? 0),
      epoch: this.deps.epoch,
    });
    for (const p of record.parks) {
      const { parkedThrough } = await this.deps.park(p.position, p.info);
      const through = this.deps.parkedThrough;
      if (through && parkedThrough > (through.get(p.stream) ?? p.position))
        through.set(p.stream, parkedThrough);
    }
    await this.deps.prune?.(this.t);
    if (!outage) for (const l of lettered) detector?.deadLettered(l.event.stream);
    tally.transactions = 1;
    return {
      kind: 'committed',
      ackPosition,
      stop,
      outage,
      retry,
      tally,
      parkedBehind: record.parkedBehind,
      held,
    };
  }

  /**
   * A fresh event that a park in an earlier batch parked behind its stream's dead letter (it had been
   * delivered already, and waited in the runtime). A redelivered event is a dead letter's retry: handled.
   */
  private parkedEarlier(e: RecordedEvent): boolean {
    if (this.redelivery) return false;
    const through = this.deps.parkedThrough?.get(e.stream);
    return through !== undefined && e.position <= through;
  }

  /** Counts an event as handled: its ledger keys and entity version are written with the batch. */
  private handled(e: RecordedEvent, keys: string[]): void {
    this.deps.outage?.succeeded(e.stream);
    this.plan.markApplied(e, keys);
    this.record.handled(e, keys);
  }

  /**
   * Handles one event: staged for the batch handler; bare on the fast path; or alone in a savepoint,
   * when it failed before or `handle` is on the slow path.
   */
  private apply(e: RecordedEvent, keys: string[], recovered: boolean): Step | Promise<Step> {
    const before = this.lastTries.get(e.position) ?? this.tried?.get(e.position);
    if (this.o.handleBatch && !before) {
      this.pending.push({ e, recovered });
      this.handled(e, keys);
      return null;
    }
    // Past here `handle` (nothing is ever staged) or an event that failed before (a held failure's
    // last attempt, or on the slow path).
    if (this.tried || before) return this.applyAlone(e, keys, recovered, before);
    const r = this.invoker.bare({ e, recovered });
    if (r === null) {
      this.handled(e, keys);
      return null;
    }
    return r instanceof Promise ? this.settled(r, e, keys) : r;
  }

  private async settled(r: Promise<Isolate | null>, e: RecordedEvent, keys: string[]): Promise<Step> {
    const step = await r;
    if (step === null) this.handled(e, keys);
    return step;
  }

  /** Runs the batch handler on the staged events: bare on the fast path, bisected to the failing event otherwise. */
  private async flush(): Promise<Isolate | null> {
    if (this.pending.length === 0) return null;
    const list = this.pending;
    this.pending = [];
    if (!this.tried) return this.invoker.bareBatch(list);
    const failure = await this.invoker.firstFailure(list);
    return failure && { kind: 'isolate', position: list[failure.index]!.e.position, error: failure.error };
  }

  /**
   * `apply` on the slow path, after any staged events: one attempt after another in a savepoint. When
   * an attempt fails and the next one must wait for a backoff, the transaction ends before the event
   * (`Later`) instead of waiting with it open.
   */
  private async applyAlone(
    e: RecordedEvent,
    keys: string[],
    recovered: boolean,
    before: Tried | undefined,
  ): Promise<Step> {
    const flushed = await this.flush();
    if (flushed) return flushed;
    const policy = this.o.onError;
    let attempt = before?.attempts ?? 0;
    let error = before?.error ?? null;
    if (before && attempt >= policy.attempts) return failed(before.error, attempt);
    for (;;) {
      // The backoff before the next attempt, unless the transaction began after it had passed.
      const waited = before?.waited === true && attempt === before.attempts;
      if (error && !waited && policy.backoff === 'exponential') {
        const delayMs = backoffDelay(attempt, policy.initialDelayMs, policy.maxDelayMs);
        if (delayMs > 0) return { kind: 'later', position: e.position, attempts: attempt, error, delayMs };
      }
      attempt++;
      error = await this.invoker.alone({ e, recovered }, attempt);
      if (!error) {
        this.handled(e, keys);
        return null;
      }
      if (attempt >= policy.attempts) return failed(error, attempt);
    }
  }

  /** Reads the versions between the last applied one and `e` from the store and applies them in order. */
  private async recoverGap(e: RecordedEvent): Promise<Step> {
    const plan = this.plan;
    const gap = await planGap(this.o, e, plan.lastApplied(e.stream));
    if (gap.kind === 'none') {
      plan.moveVersion(e.stream, e.version - 1);
      return null;
    }
    this.record.tally.gaps++;
    if (gap.kind === 'fatal') return failed(gap.error, 0, true);
    for (const m of gap.missing) {
      if (!matchesFilter(this.o.filter, m)) {
        plan.moveVersion(m.stream, m.version);
        continue;
      }
      const keys = keysOf(this.o, m);
      if (!Array.isArray(keys)) return failed(keys, 0);
      if (plan.isDuplicate(m, keys)) {
        plan.moveVersion(m.stream, m.version);
        continue;
      }
      const r = this.apply(m, keys, true);
      const step = r instanceof Promise ? await r : r;
      if (step?.kind === 'failed') {
        step.error.message = `while recovering ${m.stream} v${m.version} to fill a gap: ${step.error.message}`;
      }
      if (step) return step;
      this.record.tally.recovered++;
    }
    return null;
  }
}
