import { belowHorizon, type ResolvedRetain } from '../core/ledgerRetention.js';
import type { ResolvedOptions } from './options.js';

/** A prune runs once this many events were handled since the last one (or after `PRUNE_IDLE_MS`). */
export const PRUNE_EVERY_EVENTS = 5000;
/** A consumer that handled fewer events than `PRUNE_EVERY_EVENTS` still prunes after this long. */
const PRUNE_IDLE_MS = 30_000;
/** Most (recorded-at, position) marks kept for `retain: { age }`; older ones are thinned out. */
const MAX_AGE_MARKS = 4096;

/**
 * The consumer's `ledger: { retain }` policy: after an acknowledgement, now and then, prunes the
 * target's ledger rows the acknowledged position covers, keeping what the policy keeps and what
 * parked entities may still need, and reports the pruned horizon to the source so that a reset
 * below it is refused. Also refuses to start a consumer whose cursor is below the target's horizon.
 */
export class LedgerPruner<Tx> {
  private handled = 0;
  private lastPruneMs = Date.now();
  /** For `age`: the recorded time of the last event of acknowledged batches, with its position. */
  private marks: { ms: number; position: number }[] = [];

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
    const horizon = await target.ledgerHorizon(this.o.name);
    if (horizon === 0) return;
    if (startPosition < horizon)
      throw belowHorizon(this.o.name, horizon, 'cursor', `the source's cursor ${startPosition} is`);
    await this.o.source.consumers.setLedgerHorizon?.(this.o.name, horizon);
  }

  /** After an acknowledgement of `position`: prunes when due. */
  async acked(position: number, handled: number, lastRecordedMs: number): Promise<void> {
    const retain = this.retain;
    const prune = this.o.target.pruneLedger?.bind(this.o.target);
    if (!retain || !prune) return;
    this.handled += handled;
    if (retain.kind === 'age') this.mark(lastRecordedMs, position);
    const now = Date.now();
    if (this.handled < PRUNE_EVERY_EVENTS && (this.handled === 0 || now - this.lastPruneMs < PRUNE_IDLE_MS))
      return;
    this.handled = 0;
    this.lastPruneMs = now;
    let through = retain.kind === 'age' ? this.agedThrough(now - retain.ms) : position;
    const parked = await this.firstParked();
    if (parked !== null) {
      // A key guard other than event ids may match a parked event's retry to an older event's row:
      // nothing is pruned while one is parked. Event ids are unique, so then only the rows at and
      // after the first parked event are kept.
      if (this.o.guards.keyGuards.some((g) => g.label !== 'event-id')) return;
      through = Math.min(through, parked - 1);
    }
    if (through <= 0) return;
    const r = await prune(this.o.name, {
      through,
      ...(retain.kind === 'events' ? { keep: retain.keep } : {}),
    });
    if (r.deleted > 0 && this.horizonMatters)
      await this.o.source.consumers.setLedgerHorizon?.(this.o.name, r.horizon);
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

  /** The position of the consumer's earliest active dead letter, or null when none. */
  private async firstParked(): Promise<number | null> {
    const letters = await this.o.source.deadLetters.list(this.o.name);
    let first: number | null = null;
    for (const d of letters) if (first === null || d.event.position < first) first = d.event.position;
    return first;
  }
}
