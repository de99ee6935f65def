import type { TargetTransaction } from '../core/consumerTarget.js';
import type { EffectCallOptions, EffectWrite } from '../core/effectTypes.js';
import { InvalidInputError } from '../core/errors.js';
import type { RecordedEvent } from '../core/event.js';
import { parseVersionedName } from '../core/versionedName.js';
import { asError } from './batchPlan.js';
import type { BatchRecorder } from './batchRecorder.js';
import type { BatchHandlerContext, HandlerContext, ResolvedOptions } from './options.js';

/** An event as a handler gets it: delivered, or read from the store to fill a version gap. */
export interface Pending {
  e: RecordedEvent;
  recovered: boolean;
}

/** A handler failed where the batch has no savepoints: run the batch again with isolation. */
export interface Isolate {
  kind: 'isolate';
  /** The failing event, when known (null: a batch handler failed on the fast path). */
  position: number | null;
  error: Error;
}

/**
 * Calls the user's handler inside one batch transaction, three ways: bare (the fast path: no
 * savepoints, no promise when the handler returns none), alone in a savepoint (the isolated path, for
 * an event's retries), or on halves of a list of events, each in a savepoint (the bisection).
 */
export class Invoker<Tx> {
  private readonly version: number | null;
  private readonly tableSuffix: string;

  constructor(
    private readonly o: ResolvedOptions<Tx>,
    private readonly t: TargetTransaction<Tx>,
    private readonly redelivery: boolean,
    private readonly record: BatchRecorder,
  ) {
    ({ version: this.version, tableSuffix: this.tableSuffix } = parseVersionedName(o.name));
  }

  private readonly addOnce = (counter: string, member: string, amount = 1): Promise<boolean> =>
    this.t.addOnce(counter, member, amount);

  private readonly effect = (
    e: RecordedEvent,
    kind: string,
    payload: unknown,
    options?: EffectCallOptions,
  ): Promise<EffectWrite> =>
    this.o.effects
      ? this.o.effects.write(this.t.tx, e, kind, payload, options)
      : Promise.reject(
          new InvalidInputError('effect', `the ${this.o.target.kind} target has no effect outbox`),
        );

  /**
   * Calls `handle` on one event or `handleBatch` on events in order; returns the handler's promise, if
   * any, so that a synchronous handler (SQLite) costs no promise. Throws what the handler throws.
   */
  private invoke(list: Pending[], attempt: number): void | Promise<void> {
    const o = this.o;
    if (o.handleBatch) {
      const ctx: BatchHandlerContext<Tx> = {
        tx: this.t.tx,
        consumer: o.name,
        attempt,
        redelivery: this.redelivery,
        recovered: new Set(list.filter((p) => p.recovered).map((p) => p.e.position)),
        addOnce: this.addOnce,
        effect: this.effect,
        version: this.version,
        tableSuffix: this.tableSuffix,
      };
      return o.handleBatch(
        list.map((p) => p.e),
        ctx,
      );
    }
    const { e, recovered } = list[0]!;
    const ctx: HandlerContext<Tx> = {
      tx: this.t.tx,
      consumer: o.name,
      attempt,
      redelivery: this.redelivery,
      recovered,
      addOnce: this.addOnce,
      effect: (kind, payload, options) => this.effect(e, kind, payload, options),
      version: this.version,
      tableSuffix: this.tableSuffix,
    };
    return o.handle!(e, ctx);
  }

  /** `invoke`, awaited only when the handler returned a promise. */
  private async call(list: Pending[], attempt: number): Promise<void> {
    const r = this.invoke(list, attempt);
    if (r !== undefined && typeof r?.then === 'function') await r;
  }

  /**
   * The fast path for one event: the handler bare, its first attempt. Resolves to null once it
   * succeeded (synchronously when the handler returned no promise), or to `Isolate` when it threw:
   * the transaction then holds a failed handler's partial work and must roll back.
   */
  bare(p: Pending): null | Isolate | Promise<null | Isolate> {
    const started = performance.now();
    let r: void | Promise<void>;
    try {
      r = this.invoke([p], 1);
    } catch (err) {
      return { kind: 'isolate', position: p.e.position, error: asError(err) };
    }
    if (r !== undefined && typeof r?.then === 'function') return this.settle(r, p.e, started);
    this.record.handlerTime(started);
    return null;
  }

  private async settle(r: Promise<void>, e: RecordedEvent, started: number): Promise<null | Isolate> {
    try {
      await r;
    } catch (err) {
      return { kind: 'isolate', position: e.position, error: asError(err) };
    }
    this.record.handlerTime(started);
    return null;
  }

  /** The fast path for staged events: the batch handler bare, once for all of them. */
  async bareBatch(list: Pending[]): Promise<null | Isolate> {
    const started = performance.now();
    try {
      await this.call(list, 1);
    } catch (err) {
      return { kind: 'isolate', position: null, error: asError(err) };
    }
    this.record.handlerTime(started);
    return null;
  }

  /** The isolated path: one attempt at one event in a savepoint. Returns what the handler threw, or null; a failed attempt leaves no trace. */
  async alone(p: Pending, attempt: number): Promise<Error | null> {
    await this.t.savepoint();
    const started = performance.now();
    try {
      await this.call([p], attempt);
      await this.t.releaseSavepoint();
    } catch (err) {
      await this.t.rollbackToSavepoint();
      return asError(err);
    }
    this.record.handlerTime(started);
    return null;
  }

  /**
   * The bisection: the first failing event of `list` with its error, calling the batch handler on
   * halves, each in a savepoint; the events before it stay applied. Null when every event is applied.
   */
  async firstFailure(list: Pending[]): Promise<{ index: number; error: Error } | null> {
    await this.t.savepoint();
    const started = performance.now();
    try {
      await this.call(list, 1);
      await this.t.releaseSavepoint();
      this.record.handlerTime(started);
      return null;
    } catch (err) {
      await this.t.rollbackToSavepoint();
      if (list.length === 1) return { index: 0, error: asError(err) };
      const mid = Math.ceil(list.length / 2);
      const left = await this.firstFailure(list.slice(0, mid));
      if (left) return left;
      // The whole failed but its halves passed: a transient error, and every event is now applied.
      const right = await this.firstFailure(list.slice(mid));
      return right ? { index: mid + right.index, error: right.error } : null;
    }
  }
}
