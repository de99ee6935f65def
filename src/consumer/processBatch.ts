import type { RecordedEvent } from '../core/event.js';
import { sleep } from '../core/backoff.js';
import { openSpan, traced, type OpenSpan } from '../core/tracing.js';
import { addTally, type BatchTally } from './batchRecorder.js';
import { BatchTransaction, type BatchDeps, type Committed, type Remaining } from './batchTransaction.js';
import type { Isolate } from './invoker.js';

export type { BatchDeps } from './batchTransaction.js';
export type { BatchTally } from './batchRecorder.js';

export interface BatchOutcome {
  /** The position to acknowledge after the commits, or null for none. */
  ackPosition: number | null;
  /** Set when the consumer must stop at this event (cursor stays before it). */
  stop: { error: Error; event: RecordedEvent } | null;
  /** Set when failures make an outage at this event (not dead-lettered; cursor stays before it). */
  outage: { error: Error; event: RecordedEvent } | null;
  tally: BatchTally;
  /** Events held (a version gap under `gaps: 'wait'`, a failure while an outage may be forming): the runtime delivers them again with a later batch. */
  held: RecordedEvent[];
}

/** The target port rolls a transaction back when its callback throws: this carries `Isolate` out of it. */
class RolledBack extends Error {
  constructor(readonly outcome: Isolate) {
    super('the batch runs again with isolation');
  }
}

/**
 * Runs `BatchTransaction.run` in one target transaction: committed, or rolled back for `Isolate`.
 * Traced as `idem.handle` (the handlers' work) with an `idem.commit` child from the end of that work
 * to the end of the commit.
 */
async function transaction<Tx>(deps: BatchDeps<Tx>, rest: Remaining): Promise<Committed | Isolate> {
  const events = rest.events;
  const attributes = {
    'idem.consumer': deps.options.name,
    'idem.events': events.length,
    'idem.position.first': events[0]?.position ?? 0,
    'idem.position.last': events[events.length - 1]?.position ?? 0,
  };
  return traced('idem.handle', { parent: deps.traceparent, attributes }, async (span) => {
    let commit: OpenSpan | null = null;
    // What the transaction tells the outage detector counts only if it commits.
    const before = deps.outage?.snapshot() ?? null;
    try {
      const outcome = await deps.options.target.transaction(async (t) => {
        const outcome = await BatchTransaction.run(deps, t, rest);
        if (outcome.kind === 'isolate') throw new RolledBack(outcome);
        commit = openSpan('idem.commit', { parent: span.traceparent, attributes });
        return outcome;
      });
      (commit as OpenSpan | null)?.end();
      const t = outcome.tally;
      span.setAttributes({
        'idem.outcome': outcome.stop ? 'stop' : outcome.retry ? 'retry' : 'committed',
        'idem.processed': t.processed,
        'idem.duplicates': t.duplicates,
        'idem.parked': t.parked,
        'idem.gaps': t.gaps,
      });
      return outcome;
    } catch (err) {
      (commit as OpenSpan | null)?.end(err);
      deps.outage?.restore(before);
      if (err instanceof RolledBack) {
        span.setAttributes({ 'idem.outcome': 'isolate' });
        return err.outcome;
      }
      throw err;
    }
  });
}

/**
 * Runs one delivered batch in as few target transactions as it takes: checkpoint and ledger lookups,
 * the handler per new event (or the batch handler once for all of them), ledger rows, entity versions
 * and checkpoint, parks, commit. The batch first runs without savepoints. When a handler throws, it
 * rolls back and runs again with isolation: `handle` gets a savepoint per event, so a failing event's
 * work is undone alone and its neighbours' work commits; `handleBatch` is called on halves of the
 * events, each in a savepoint, down to the first failing event, and the batch then runs once more with
 * that event handled alone (with its retries and `onError`) between the events before and after it.
 * An event that waits for a retry's backoff ends its transaction: the events before it commit, and
 * it and the events after it run in the next transaction once the backoff has passed, so that other
 * consumers sharing the target are not locked out meanwhile.
 */
export async function processBatch<Tx>(
  deps: BatchDeps<Tx>,
  events: RecordedEvent[],
  redelivery: boolean,
): Promise<BatchOutcome> {
  let tally: BatchTally | null = null;
  let ackPosition: number | null = null;
  const held: RecordedEvent[] = [];
  let heldFrom = deps.heldFrom ?? Infinity;
  let rest: Remaining = { events, redelivery, tried: null, parkedBehind: new Set(), heldFrom };
  for (;;) {
    const outcome = await transaction(deps, rest);
    if (outcome.kind === 'isolate') {
      const tried = new Map(rest.tried ?? []);
      const { position, error } = outcome;
      // Each isolation adds a new event (isolated events are never in a bisected group), so this ends.
      if (position !== null)
        tried.set(position, { attempts: (tried.get(position)?.attempts ?? 0) + 1, error, waited: false });
      rest = { ...rest, tried };
      continue;
    }
    if (tally) addTally(tally, outcome.tally);
    else tally = outcome.tally;
    if (outcome.ackPosition !== null && held.length === 0) ackPosition = outcome.ackPosition;
    for (const e of outcome.held) {
      held.push(e);
      heldFrom = Math.min(heldFrom, e.position);
    }
    const retry = outcome.retry;
    if (!retry) return { ackPosition, stop: outcome.stop, outage: outcome.outage, tally, held };
    await sleep(retry.delayMs);
    const tried = new Map(rest.tried ?? []);
    tried.set(retry.position, { attempts: retry.attempts, error: retry.error, waited: true });
    rest = {
      events: rest.events.slice(retry.resumeAt),
      redelivery,
      tried,
      parkedBehind: outcome.parkedBehind,
      heldFrom,
    };
  }
}
