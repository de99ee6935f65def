import type { LedgerEntry, TargetTransaction } from '../core/consumerTarget.js';
import { FencedError, InvalidInputError } from '../core/errors.js';
import type { RecordedEvent } from '../core/event.js';
import { matchesFilter } from '../core/filter.js';
import type { ParkInfo } from '../core/subscription.js';
import { backoffDelay, sleep } from '../core/backoff.js';
import type { EffectCallOptions, EffectWrite } from '../core/effectTypes.js';
import type { BatchHandlerContext, HandlerContext, ResolvedOptions } from './options.js';
import { VersionGapError } from './versionGapError.js';
import { parseVersionedName } from '../core/versionedName.js';

/** What the runtime needs from the subscription while a batch's transaction is open. */
export interface BatchDeps<Tx> {
  options: ResolvedOptions<Tx>;
  epoch: number;
  /** Dead-letters a delivered event (before the commit, so a crash can never skip it). */
  park(position: number, info: ParkInfo): Promise<void>;
}

/** What a committed batch did; applied to the metrics only after the commit. */
export interface BatchTally {
  processed: number;
  duplicates: number;
  gaps: number;
  recovered: number;
  deadLetters: number;
  parked: number;
  parkedStreams: string[];
  handledStreams: string[];
  handlerSeconds: number[];
  recordedAtMs: number[];
}

export interface BatchOutcome {
  /** The position to acknowledge after the commit, or null for none. */
  ackPosition: number | null;
  /** Set when the consumer must stop at this event (cursor stays before it). */
  stop: { error: Error; event: RecordedEvent } | null;
  tally: BatchTally;
}

interface Failure {
  error: Error;
  attempts: number;
  /** Stops the consumer whatever `onError.then` says (a gap under `gaps: 'fail'`). */
  fatal: boolean;
}

/**
 * Thrown out of a batch's transaction to run the batch again: from the fast path (no savepoints) when
 * a handler failed, or when a batch handler's failing event was isolated (`position`), so that the
 * next run handles that event alone, after its predecessors and before its successors.
 */
class SlowPathNeeded extends Error {
  constructor(
    readonly position: number | null,
    readonly error: Error,
  ) {
    super('a handler failed; the batch runs again with isolation');
  }
}

/** A failed try of one event before the current run: how many attempts it used, and the last error. */
interface Tried {
  attempts: number;
  error: Error;
}

/** An event a batch handler will get: new after the guards, possibly read from the store to fill a gap. */
interface Pending {
  e: RecordedEvent;
  recovered: boolean;
}

function errorInfo(err: Error): NonNullable<ParkInfo['error']> {
  return { name: err.name, message: err.message, ...(err.stack ? { stack: err.stack } : {}) };
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

/**
 * Runs one delivered batch in one target transaction: checkpoint and ledger lookups, the handler per new
 * event (or the batch handler once for all of them), ledger rows, entity versions and checkpoint, parks,
 * commit. The batch first runs without savepoints. When a handler throws, it rolls back and runs again
 * with isolation: `handle` gets a savepoint per event, so a failing event's work is undone alone and its
 * neighbours' work commits; `handleBatch` is called on halves of the events, each in a savepoint, down to
 * the first failing event, and the batch then runs once more with that event handled alone (with its
 * retries and `onError`) between the events before and after it.
 */
export async function processBatch<Tx>(
  deps: BatchDeps<Tx>,
  events: RecordedEvent[],
  redelivery: boolean,
): Promise<BatchOutcome> {
  let tried: Map<number, Tried> | null = null;
  for (;;) {
    try {
      return await runBatch(deps, events, redelivery, tried);
    } catch (err) {
      if (!(err instanceof SlowPathNeeded)) throw err;
      tried = new Map(tried ?? []);
      if (err.position !== null) {
        // Each run that ends here adds a new event (isolated events are never in a bisected group), so this ends.
        tried.set(err.position, { attempts: (tried.get(err.position)?.attempts ?? 0) + 1, error: err.error });
      }
    }
  }
}

function runBatch<Tx>(
  deps: BatchDeps<Tx>,
  events: RecordedEvent[],
  redelivery: boolean,
  /** null on the fast path; then the events that failed in an earlier run, by position. */
  tried: Map<number, Tried> | null,
): Promise<BatchOutcome> {
  const o = deps.options;
  const name = o.name;
  const { version, tableSuffix } = parseVersionedName(name);
  return o.target.transaction(async (t: TargetTransaction<Tx>): Promise<BatchOutcome> => {
    const tally: BatchTally = {
      processed: 0,
      duplicates: 0,
      gaps: 0,
      recovered: 0,
      deadLetters: 0,
      parked: 0,
      parkedStreams: [],
      handledStreams: [],
      handlerSeconds: [],
      recordedAtMs: [],
    };
    const cp = await t.checkpoint(name);
    if (cp.epoch > deps.epoch) throw new FencedError(name, deps.epoch, cp.epoch);
    // A redelivered batch at or below the committed checkpoint is skipped without a ledger lookup;
    // dead letters delivered again by `retry` sit below it on purpose and always go through the guards.
    const offset = redelivery ? 0 : events.findIndex((e) => e.position > cp.position);
    const fresh = offset < 0 ? [] : events.slice(offset);
    tally.duplicates += events.length - fresh.length;

    const keysOf = (e: RecordedEvent): string[] | Error => {
      try {
        return o.guards.keyGuards.map((g) => g.key(e));
      } catch (err) {
        return asError(err);
      }
    };
    const freshKeys = fresh.map(keysOf);
    const applied =
      o.guards.entityVersion && fresh.length > 0
        ? await t.entityVersions(name, [...new Set(fresh.map((e) => e.stream))])
        : new Map<string, number>();
    const versions = new Map<string, number>();
    const lastApplied = (stream: string): number => versions.get(stream) ?? applied.get(stream) ?? 0;
    const appliedAlready = (e: RecordedEvent): boolean =>
      o.guards.entityVersion && e.version <= lastApplied(e.stream);
    // The ledger is asked only about events the entity versions do not already call duplicates
    // (versions only grow within a batch, so such an event stays a duplicate whatever the ledger says).
    const lookup: string[] = [];
    for (let i = 0; i < fresh.length; i++) {
      const k = freshKeys[i]!;
      if (Array.isArray(k) && !appliedAlready(fresh[i]!)) for (const key of k) lookup.push(key);
    }
    const seen = lookup.length > 0 ? await t.processedKeys(name, lookup) : new Set<string>();
    const entries: LedgerEntry[] = [];
    const parks: { position: number; info: ParkInfo }[] = [];
    const parkedBehind = new Set<string>();

    const isDuplicate = (e: RecordedEvent, keys: string[]): boolean =>
      keys.some((k) => seen.has(k)) || appliedAlready(e);

    const addOnce = (counter: string, member: string, amount = 1): Promise<boolean> =>
      t.addOnce(counter, member, amount);
    const effect = (
      e: RecordedEvent,
      kind: string,
      payload: unknown,
      options?: EffectCallOptions,
    ): Promise<EffectWrite> =>
      o.effects
        ? o.effects.write(t.tx, e, kind, payload, options)
        : Promise.reject(new InvalidInputError('effect', `the ${o.target.kind} target has no effect outbox`));

    /**
     * Calls the user's handler on one event (`handle`) or on events in order (`handleBatch`); returns
     * its promise, if any, so that a synchronous handler (SQLite) costs no promise. Throws what it throws.
     */
    const invoke = (list: Pending[], attempt: number): void | Promise<void> => {
      if (o.handleBatch) {
        const ctx: BatchHandlerContext<Tx> = {
          tx: t.tx,
          consumer: name,
          attempt,
          redelivery,
          recovered: new Set(list.filter((p) => p.recovered).map((p) => p.e.position)),
          addOnce,
          effect,
          version,
          tableSuffix,
        };
        return o.handleBatch(
          list.map((p) => p.e),
          ctx,
        );
      }
      const { e, recovered } = list[0]!;
      const ctx: HandlerContext<Tx> = {
        tx: t.tx,
        consumer: name,
        attempt,
        redelivery,
        recovered,
        addOnce,
        effect: (kind, payload, options) => effect(e, kind, payload, options),
        version,
        tableSuffix,
      };
      return o.handle!(e, ctx);
    };
    /** `invoke`, awaited only when the handler returned a promise. */
    const call = async (list: Pending[], attempt: number): Promise<void> => {
      const r = invoke(list, attempt);
      if (r !== undefined && typeof r?.then === 'function') await r;
    };

    /** Counts an event as handled: its ledger keys and entity version are written with the batch. */
    const handled = (e: RecordedEvent, keys: string[]): void => {
      for (const k of keys) {
        seen.add(k);
        entries.push({ key: k, position: e.position });
      }
      if (o.guards.entityVersion) versions.set(e.stream, e.version);
      tally.processed++;
      tally.handledStreams.push(e.stream);
      tally.recordedAtMs.push(Date.parse(e.recordedAt));
    };

    /** Events staged for the batch handler, handled together by `flush`. */
    let pending: Pending[] = [];

    /** The first failing event of `list` with its error, calling the batch handler on halves, each in a savepoint; the events before it stay applied. */
    const firstFailure = async (list: Pending[]): Promise<{ index: number; error: Error } | null> => {
      await t.savepoint();
      const started = performance.now();
      try {
        await call(list, 1);
        await t.releaseSavepoint();
        tally.handlerSeconds.push((performance.now() - started) / 1000);
        return null;
      } catch (err) {
        await t.rollbackToSavepoint();
        if (list.length === 1) return { index: 0, error: asError(err) };
        const mid = Math.ceil(list.length / 2);
        const left = await firstFailure(list.slice(0, mid));
        if (left) return left;
        // The whole failed but its halves passed: a transient error, and every event is now applied.
        const right = await firstFailure(list.slice(mid));
        return right ? { index: mid + right.index, error: right.error } : null;
      }
    };

    /** Runs the batch handler on the staged events: bare on the fast path, bisected to the failing event otherwise. */
    const flush = async (): Promise<void> => {
      if (pending.length === 0) return;
      const list = pending;
      pending = [];
      if (!tried) {
        const started = performance.now();
        try {
          await call(list, 1);
        } catch (err) {
          throw new SlowPathNeeded(null, asError(err));
        }
        tally.handlerSeconds.push((performance.now() - started) / 1000);
        return;
      }
      const failed = await firstFailure(list);
      if (failed) throw new SlowPathNeeded(list[failed.index]!.e.position, failed.error);
    };

    /**
     * Handles one event: bare on the fast path (a failure reruns the batch with isolation); staged for
     * the batch handler; or alone in a savepoint with its retries, when it failed before or `handle` is
     * on the slow path. Returns the failure once its attempts are used up.
     */
    const apply = (
      e: RecordedEvent,
      keys: string[],
      recovered: boolean,
    ): Failure | null | Promise<Failure | null> => {
      const before = tried?.get(e.position);
      if (o.handleBatch && !before) {
        pending.push({ e, recovered });
        handled(e, keys);
        return null;
      }
      // Past here `handle` (nothing is ever staged) or an event that failed before (only on the slow path).
      if (tried) return applyAlone(e, keys, recovered, before);
      // The fast path: the handler bare (a failure reruns the batch with isolation), and no promise
      // when the handler returns none (SQLite targets).
      const started = performance.now();
      let r: void | Promise<void>;
      try {
        r = invoke([{ e, recovered }], 1);
      } catch (err) {
        throw new SlowPathNeeded(e.position, asError(err));
      }
      if (r !== undefined && typeof r?.then === 'function') return settle(r, e, keys, started);
      return done(e, keys, started);
    };

    /** A handled event's bookkeeping: its handler time, ledger keys and entity version. */
    const done = (e: RecordedEvent, keys: string[], started: number): null => {
      tally.handlerSeconds.push((performance.now() - started) / 1000);
      handled(e, keys);
      return null;
    };

    /** The fast path's end for a handler that returned a promise. */
    const settle = async (
      r: Promise<void>,
      e: RecordedEvent,
      keys: string[],
      started: number,
    ): Promise<null> => {
      try {
        await r;
      } catch (err) {
        throw new SlowPathNeeded(e.position, asError(err));
      }
      return done(e, keys, started);
    };

    /** `apply` on the slow path, after any staged events: in a savepoint, with its retries. */
    const applyAlone = async (
      e: RecordedEvent,
      keys: string[],
      recovered: boolean,
      before: Tried | undefined,
    ): Promise<Failure | null> => {
      await flush();
      let attempt = before?.attempts ?? 0;
      if (before && attempt >= o.onError.attempts)
        return { error: before.error, attempts: attempt, fatal: false };
      for (;;) {
        if (attempt > 0 && o.onError.backoff === 'exponential') {
          await sleep(backoffDelay(attempt, o.onError.initialDelayMs, o.onError.maxDelayMs));
        }
        attempt++;
        await t.savepoint();
        const started = performance.now();
        try {
          await call([{ e, recovered }], attempt);
          await t.releaseSavepoint();
        } catch (err) {
          await t.rollbackToSavepoint();
          if (attempt >= o.onError.attempts) return { error: asError(err), attempts: attempt, fatal: false };
          continue;
        }
        return done(e, keys, started);
      }
    };

    /** Reads the versions between the last applied one and `e` from the store and applies them in order. */
    const recoverGap = async (e: RecordedEvent, current: number): Promise<Failure | null> => {
      const need = e.version - current - 1;
      const missing: RecordedEvent[] = [];
      for await (const m of o.source.readStream(e.stream, { fromVersion: current + 1, limit: need }))
        missing.push(m);
      const complete = missing.length === need && missing.every((m, i) => m.version === current + 1 + i);
      if (!complete) {
        tally.gaps++;
        const error = new VersionGapError(
          e.stream,
          current + 1,
          e.version,
          'the store does not have the missing versions',
        );
        return { error, attempts: 0, fatal: true };
      }
      // Versions outside the consumer's filter are not input it missed: they only move the version on.
      if (!missing.some((m) => matchesFilter(o.filter, m))) {
        versions.set(e.stream, e.version - 1);
        return null;
      }
      tally.gaps++;
      if (o.gaps === 'fail') {
        return {
          error: new VersionGapError(e.stream, current + 1, e.version, "gaps: 'fail'"),
          attempts: 0,
          fatal: true,
        };
      }
      for (const m of missing) {
        if (!matchesFilter(o.filter, m)) {
          versions.set(m.stream, m.version);
          continue;
        }
        const keys = keysOf(m);
        if (!Array.isArray(keys)) return { error: keys, attempts: 0, fatal: false };
        if (isDuplicate(m, keys)) {
          versions.set(m.stream, m.version);
          continue;
        }
        const failed = await apply(m, keys, true);
        if (failed) {
          failed.error.message = `while recovering ${m.stream} v${m.version} to fill a gap: ${failed.error.message}`;
          return failed;
        }
        tally.recovered++;
      }
      return null;
    };

    let stop: BatchOutcome['stop'] = null;
    let ackIndex = events.length - 1;
    for (let i = 0; i < fresh.length; i++) {
      const e = fresh[i]!;
      const keys = freshKeys[i]!;
      if (parkedBehind.has(e.stream)) {
        // Not handled: parking the blocker parks the stream's later delivered events behind it.
        tally.parked++;
        continue;
      }
      let failure: Failure | null;
      if (!Array.isArray(keys)) failure = { error: keys, attempts: 0, fatal: false };
      else if (isDuplicate(e, keys)) {
        tally.duplicates++;
        continue;
      } else {
        const current = lastApplied(e.stream);
        failure = o.guards.entityVersion && e.version > current + 1 ? await recoverGap(e, current) : null;
        if (!failure) {
          const r = apply(e, keys, false);
          failure = r instanceof Promise ? await r : r;
        }
      }
      if (!failure) continue;
      if (o.onError.then === 'dead-letter' && !failure.fatal) {
        const attempts = Math.max(1, failure.attempts);
        parks.push({
          position: e.position,
          info: {
            reason: `handler failed after ${attempts} attempt(s)`,
            error: errorInfo(failure.error),
            attempts,
          },
        });
        parkedBehind.add(e.stream);
        tally.deadLetters++;
        tally.parked++;
        tally.parkedStreams.push(e.stream);
        continue;
      }
      stop = { error: failure.error, event: e };
      ackIndex = (redelivery ? 0 : offset) + i - 1;
      break;
    }
    await flush();
    const ackPosition = ackIndex >= 0 ? events[ackIndex]!.position : null;
    await t.record(name, {
      entries,
      versions,
      position: Math.max(cp.position, ackPosition ?? 0),
      epoch: deps.epoch,
    });
    for (const p of parks) await deps.park(p.position, p.info);
    return { ackPosition, stop, tally };
  });
}
