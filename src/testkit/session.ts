import type { Consumer } from '../consumer/consumer.js';
import type { ConsumerMetricsSnapshot } from '../consumer/metrics.js';
import type { BatchRecord, ConsumerTarget } from '../core/consumerTarget.js';
import type { RecordedEvent } from '../core/event.js';
import type { EventStore } from '../core/eventStore.js';
import { isIdemError } from '../core/errors.js';
import type { Workspace } from './backend.js';
import { dispatchWithSpy, type EffectLog } from './effectSpy.js';
import { faultySource, faultyTarget, type FaultHooks } from './faults.js';
import { appendHistory, type HistoryEvent } from './history.js';
import { asJson } from './stateDiff.js';
import type { Subject } from './subject.js';

const RETRY_MS = 20;

/** What one scenario run ends with, for the checks. */
export interface RunOutcome {
  state: unknown;
  effects: EffectLog;
  /** Every event message the consumer got, in order (the copies of a repeated delivery included). */
  delivered: RecordedEvent[];
  /** The batch records the runtime wrote (rolled-back ones included). */
  records: BatchRecord[];
  /** Metrics of the last consumer instance of the run. */
  metrics: ConsumerMetricsSnapshot | null;
  /** What the scenario observed on the way (e.g. "the consumer stopped at the poison event"). */
  notes: string[];
  /** Set when the scenario itself found a fault before comparing states (e.g. a cursor past an unhandled event). */
  violation: string | null;
}

/**
 * One scenario's fresh store and target, and the consumer as the scenario drives it: the source and
 * target handed to the user's definition go through `hooks`, which the scenario sets.
 */
export class Session<T extends ConsumerTarget<unknown>> {
  readonly hooks: FaultHooks = {};
  readonly notes: string[] = [];
  violation: string | null = null;
  private readonly deliveredEvents: RecordedEvent[] = [];
  private readonly batchRecords: BatchRecord[] = [];
  private lastMetrics: ConsumerMetricsSnapshot | null = null;
  private readonly source: EventStore;
  private readonly target: T;

  constructor(
    readonly subject: Subject<T>,
    readonly ws: Workspace<T>,
  ) {
    const observe: FaultHooks = {
      delivered: (events) => {
        for (const e of events) this.deliveredEvents.push(e);
        this.hooks.delivered?.(events);
      },
      transform: (it) => (this.hooks.transform ? this.hooks.transform(it) : passAll(it)),
      beforeAck: (p) => this.hooks.beforeAck?.(p),
      acked: (p) => this.hooks.acked?.(p),
      recorded: (r) => {
        this.batchRecords.push(r);
        this.hooks.recorded?.(r);
      },
      beforeCommit: (r) => this.hooks.beforeCommit?.(r),
    };
    this.source = faultySource(ws.store, observe);
    this.target = faultyTarget(ws.target, observe);
  }

  get store(): EventStore {
    return this.ws.store;
  }

  /** A new consumer instance (a process start) of `version`. */
  make(version = 1): Consumer {
    return this.subject.consumer(this.source, this.target, { version });
  }

  /**
   * Starts the consumer once on the empty store, so that its live point is 0 and the effects of the
   * history are live (dispatched), then appends the history.
   */
  async prime(history: readonly HistoryEvent[]): Promise<void> {
    const c = this.make();
    await this.start(c);
    await c.stop();
    await appendHistory(this.ws.store, history);
  }

  /**
   * Starts `c` once the previous instance's lease is released: on PostgreSQL the release can still be
   * in flight when `stop()` resolves, and a start meanwhile is refused with `consumer_busy`.
   */
  async start(c: Consumer): Promise<void> {
    const deadline = Date.now() + this.subject.timeoutMs;
    for (;;) {
      try {
        return await c.start();
      } catch (err) {
        if (!isIdemError(err) || err.code !== 'consumer_busy' || Date.now() > deadline) throw err;
        await new Promise((res) => setTimeout(res, RETRY_MS));
      }
    }
  }

  /** Starts `c`, waits until it caught up with the store's head, stops it. Rejects if it fails first. */
  async runToEnd(c: Consumer): Promise<Consumer> {
    await this.start(c);
    try {
      await c.whenCaughtUp({ timeoutMs: this.subject.timeoutMs });
    } finally {
      await c.stop();
      this.lastMetrics = c.metrics();
    }
    return c;
  }

  /** Reads the state of `version`, dispatches the effects through the spy, and closes the workspace. */
  async finish(version = 1): Promise<RunOutcome> {
    try {
      const state = asJson(await this.subject.read(this.target, { version }));
      const effects = await dispatchWithSpy(this.ws.target, this.subject.effects);
      return {
        state,
        effects,
        delivered: this.deliveredEvents,
        records: this.batchRecords,
        metrics: this.lastMetrics,
        notes: this.notes,
        violation: this.violation,
      };
    } finally {
      await this.ws.close();
    }
  }
}

async function* passAll<M>(it: AsyncIterator<M>): AsyncGenerator<M, void, undefined> {
  for (;;) {
    const r = await it.next();
    if (r.done) return;
    yield r.value;
  }
}

/** Opens a workspace, runs `body` in it and returns the outcome (the workspace is closed either way). */
export async function inSession<T extends ConsumerTarget<unknown>>(
  subject: Subject<T>,
  body: (s: Session<T>) => Promise<number | void>,
): Promise<RunOutcome> {
  const s = new Session(subject, await subject.backend.open());
  let version: number | void;
  try {
    version = await body(s);
  } catch (err) {
    await s.ws.close();
    throw err;
  }
  return s.finish(version ?? 1);
}
