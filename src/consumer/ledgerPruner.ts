import type {
  ConsumerTarget,
  PruneLedgerOptions,
  PruneLedgerResult,
  TargetTransaction,
} from '../core/consumerTarget.js';
import { InvalidInputError } from '../core/errors.js';
import { recordKind } from '../core/consumerGroups.js';
import { idemStoreOf, type ConsumerSource } from '../core/consumerSource.js';
import { belowHorizon, type ResolvedRetain } from '../core/ledgerRetention.js';
import type { ResolvedOptions } from './options.js';

/** A prune runs once this many events were handled since the last one (or after `PRUNE_IDLE_MS`). */
export const PRUNE_EVERY_EVENTS = 5000;
/** `PRUNE_EVERY_EVENTS`, or a smaller count a test set with `pruneEveryEventsForTests`. */
let pruneEveryEvents = PRUNE_EVERY_EVENTS;

/**
 * For tests: consumers prune every `events` handled events instead of every `PRUNE_EVERY_EVENTS`,
 * so that a suite exercises several prunes without handling tens of thousands of events. Returns a
 * function that restores the default.
 */
export function pruneEveryEventsForTests(events: number): () => void {
  if (!Number.isInteger(events) || events < 1)
    throw new InvalidInputError('events', 'must be an integer >= 1');
  pruneEveryEvents = events;
  return () => {
    pruneEveryEvents = PRUNE_EVERY_EVENTS;
  };
}
/** A consumer that handled fewer events than that still prunes after this long. */
const PRUNE_IDLE_MS = 30_000;
/** Most (recorded-at, position) marks kept for `retain: { age }`; older ones are thinned out. */
const MAX_AGE_MARKS = 4096;

/**
 * The consumer's `ledger: { retain }` policy: after an acknowledgement, now and then, prunes the
 * target's ledger rows the acknowledged position covers, keeping what the policy keeps and what
 * parked entities may still need, and reports the pruned horizon to the source so that a reset
 * below it is refused. While more events are to come, the prune runs inside the next batch's
 * transaction (no commit of its own); once caught up, in its own. Also refuses to start a consumer
 * whose cursor is below the target's horizon.
 */
export class LedgerPruner<Tx> {
  private handled = 0;
  private lastPruneMs = Date.now();
  /** For `age`: the recorded time of the last event of acknowledged batches, with its position. */
  private marks: { ms: number; position: number }[] = [];
  /** A prune due, for the next batch's transaction. */
  private pending: PruneLedgerOptions | null = null;
  /** What the pending prune did in a batch's transaction, to count once that batch is acknowledged. */
  private staged: PruneLedgerResult | null = null;
  /** A horizon pruned in batches' transactions and not told to the source yet. */
  private unreported: number | null = null;
  private lastReportMs = Date.now();

  constructor(
    private readonly o: ResolvedOptions<Tx>,
    private readonly retain: ResolvedRetain | null,
  ) {}

  /** With the entity-version guard, a redelivery below the horizon is skipped by the entity versions. */
  private get horizonMatters(): boolean {
    return !this.o.guards.entityVersion;
  }

  /**
   * At start: `invalid_input` when the source's cursor is below the target's pruned horizon (a reset
   * past the store's own check, or a consumer deleted and made again); otherwise tells the source the
   * horizon, so that its `consumers.reset` refuses going below it.
   */
  async checkStart(startPosition: number): Promise<void> {
    const target = this.o.target;
    if (!target.ledgerHorizon || !this.horizonMatters) return;
    const horizon = await target.ledgerHorizon(this.o.targetName);
    if (horizon === 0) return;
    if (startPosition < horizon)
      throw belowHorizon(this.o.name, horizon, 'cursor', `the source's cursor ${startPosition} is`);
    await idemStoreOf(this.o.source)?.consumers.setLedgerHorizon?.(this.o.targetName, horizon);
  }

  /**
   * In a batch's transaction, after its record: runs the pending prune there. Bounded by an earlier
   * acknowledgement, so by this transaction's checkpoint too, and rolled back with the batch.
   */
  readonly inTransaction = async (t: TargetTransaction<Tx>): Promise<void> => {
    if (this.pending && t.pruneLedger) this.staged = await t.pruneLedger(this.o.targetName, this.pending);
  };

  /** When caught up: runs a pending prune in its own transaction (no batch may come soon); reports the horizon. */
  async caughtUp(): Promise<void> {
    const pending = this.pending;
    this.pending = null;
    if (pending && this.o.target.pruneLedger) {
      this.staged = null;
      await this.report((await this.o.target.pruneLedger(this.o.targetName, pending)).horizon);
    } else await this.stopping();
  }

  /** When stopping (the lease still held): tells the source a horizon it does not know yet. */
  async stopping(): Promise<void> {
    if (this.unreported !== null) await this.report(this.unreported);
  }

  /**
   * After an acknowledgement of `position`: takes note of what a batch's transaction pruned, and
   * prunes when due: in the next batch's transaction when `more` events are to come, else at once
   * (and then reports the horizon).
   */
  async acked(position: number, handled: number, lastRecordedMs: number, more: boolean): Promise<void> {
    const retain = this.retain;
    if (!retain || !this.o.target.pruneLedger) return;
    const now = Date.now();
    if (this.staged) {
      this.unreported = this.staged.horizon;
      this.staged = null;
      this.pending = null;
    }
    // While catching up the store learns the horizon at most every `PRUNE_IDLE_MS` (and once caught
    // up or stopping): it refuses a reset only while the lease is free, and after a crash the
    // consumer checks its cursor against the target's horizon as it starts.
    if (this.unreported !== null && now - this.lastReportMs >= PRUNE_IDLE_MS)
      await this.report(this.unreported);
    this.handled += handled;
    if (retain.kind === 'age') this.mark(lastRecordedMs, position);
    if (this.handled < pruneEveryEvents && (this.handled === 0 || now - this.lastPruneMs < PRUNE_IDLE_MS))
      return;
    this.handled = 0;
    this.lastPruneMs = now;
    const through = retain.kind === 'age' ? this.agedThrough(now - retain.ms) : position;
    if (through <= 0) return;
    const options: PruneConsumerLedgerOptions = {
      through,
      ...(retain.kind === 'events' ? { keep: retain.keep } : {}),
      keysBeyondIds: this.o.guards.keyGuards.some((g) => g.label !== 'event-id'),
    };
    if (!more) {
      this.pending = null;
      const r = await pruneConsumerLedger(this.o.source, this.o.target, this.o.targetName, {
        ...options,
        reportHorizon: false,
      });
      if (r) await this.report(r.horizon);
      return;
    }
    this.pending = await pruneBound(this.o.source, this.o.targetName, options);
  }

  /** Tells the source the horizon (not with the entity-version guard). */
  private async report(horizon: number): Promise<void> {
    this.unreported = null;
    this.lastReportMs = Date.now();
    if (this.horizonMatters)
      await idemStoreOf(this.o.source)?.consumers.setLedgerHorizon?.(this.o.targetName, horizon);
  }

  private mark(ms: number, position: number): void {
    this.marks.push({ ms, position });
    if (this.marks.length > MAX_AGE_MARKS) this.marks = this.marks.filter((_, i) => i % 2 === 1);
  }

  /** The last acknowledged position whose event was recorded at or before `cutoffMs` (0 for none). */
  private agedThrough(cutoffMs: number): number {
    let through = 0;
    let keepFrom = 0;
    for (let i = 0; i < this.marks.length; i++) {
      const m = this.marks[i]!;
      if (m.ms > cutoffMs) break;
      through = Math.max(through, m.position);
      keepFrom = i;
    }
    this.marks = this.marks.slice(keepFrom);
    return through;
  }
}

export interface PruneConsumerLedgerOptions extends PruneLedgerOptions {
  /** The consumer has a key guard other than `event-id`: nothing is pruned while it has dead letters. */
  keysBeyondIds?: boolean;
  /** Tell the source the new horizon (not with the entity-version guard). @default true */
  reportHorizon?: boolean;
}

/**
 * Prunes `name`'s ledger in `target` as far as its parked entities allow, and reports the horizon to
 * `source`: rows at and after the earliest active dead letter stay (a retried event's row must not be
 * mistaken for pruned), and with key guards beyond event ids nothing is pruned while any is parked (a
 * retried command may match an older event's key). Returns null when it pruned nothing for that reason.
 */
export async function pruneConsumerLedger<Tx>(
  source: ConsumerSource,
  target: ConsumerTarget<Tx>,
  name: string,
  options: PruneConsumerLedgerOptions = {},
): Promise<PruneLedgerResult | null> {
  if (!target.pruneLedger)
    throw new InvalidInputError('target', `the ${target.kind} target cannot prune its ledger`);
  const bound = await pruneBound(source, name, options);
  if (!bound) return null;
  const r = await target.pruneLedger(name, bound);
  if (options.reportHorizon !== false)
    await idemStoreOf(source)?.consumers.setLedgerHorizon?.(name, r.horizon);
  return r;
}

/** `options` bounded by `name`'s parked entities (see `pruneConsumerLedger`); null when nothing may go. */
async function pruneBound(
  source: ConsumerSource,
  name: string,
  options: PruneConsumerLedgerOptions,
): Promise<PruneLedgerOptions | null> {
  let through = options.through ?? Number.MAX_SAFE_INTEGER;
  let first: number | null = null;
  // A group's partition (`billing#3`): the group's dead letters, every partition's (a safe superset).
  const kind = recordKind(name);
  for (const d of (await idemStoreOf(source)?.deadLetters.list(
    kind.kind === 'partition' ? kind.group : name,
  )) ?? [])
    if (first === null || d.event.position < first) first = d.event.position;
  if (first !== null) {
    if (options.keysBeyondIds === true) return null;
    through = Math.min(through, first - 1);
  }
  return { through, ...(options.keep !== undefined ? { keep: options.keep } : {}) };
}
