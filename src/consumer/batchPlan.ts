import type { TargetTransaction } from '../core/consumerTarget.js';
import { FencedError } from '../core/errors.js';
import type { RecordedEvent } from '../core/event.js';
import { matchesFilter } from '../core/filter.js';
import type { ResolvedOptions } from './options.js';
import { VersionGapError } from './versionGapError.js';

/** A delivered event's ledger keys, or what its key guard threw. */
export type Keys = string[] | Error;

/** What filling a version gap takes: nothing, the missing events in order, or a stop. */
export type GapPlan =
  { kind: 'none' } | { kind: 'fill'; missing: RecordedEvent[] } | { kind: 'fatal'; error: VersionGapError };

export function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

/**
 * What a batch's transaction knows before any handler runs: which delivered events are past the
 * checkpoint, their ledger keys, and which of those keys the ledger holds and which versions the
 * entities are at. As events are handled in the batch, their keys and versions join it, so that
 * `isDuplicate` stays right for the events after them.
 */
export class BatchPlan {
  /** Versions applied in this batch, per stream: written with the batch. */
  readonly versions = new Map<string, number>();

  private constructor(
    /** The checkpoint position the target held when the transaction began. */
    readonly checkpoint: number,
    /** Index in the delivered events of `fresh[0]`. */
    readonly start: number,
    /** The delivered events the guards look at: past the checkpoint (all of them on a redelivery). */
    readonly fresh: RecordedEvent[],
    /** `fresh[i]`'s ledger keys. */
    readonly keys: Keys[],
    private readonly entityVersion: boolean,
    private readonly applied: Map<string, number>,
    private readonly seen: Set<string>,
  ) {}

  /**
   * Reads the checkpoint (refusing a newer owner's epoch), the entity versions of the fresh events'
   * streams, and which of their keys the ledger holds: at most three queries.
   */
  static async read<Tx>(
    t: TargetTransaction<Tx>,
    o: ResolvedOptions<Tx>,
    epoch: number,
    events: RecordedEvent[],
    redelivery: boolean,
  ): Promise<BatchPlan> {
    const cp = await t.checkpoint(o.targetName);
    if (cp.epoch > epoch) throw new FencedError(o.targetName, epoch, cp.epoch);
    // A redelivered batch at or below the committed checkpoint is skipped without a ledger lookup;
    // dead letters delivered again by `retry` sit below it on purpose and always go through the guards.
    const found = redelivery ? 0 : events.findIndex((e) => e.position > cp.position);
    const start = found < 0 ? events.length : found;
    const fresh = start === 0 ? events : events.slice(start);
    const keys = fresh.map((e) => keysOf(o, e));
    const entityVersion = o.guards.entityVersion;
    const applied =
      entityVersion && fresh.length > 0
        ? await t.entityVersions(o.targetName, [...new Set(fresh.map((e) => e.stream))])
        : new Map<string, number>();
    const plan = new BatchPlan(cp.position, start, fresh, keys, entityVersion, applied, new Set());
    // The ledger is asked only about events the entity versions do not already call duplicates
    // (versions only grow within a batch, so such an event stays a duplicate whatever the ledger says).
    const lookup: string[] = [];
    for (let i = 0; i < fresh.length; i++) {
      const k = keys[i]!;
      if (Array.isArray(k) && !plan.appliedAlready(fresh[i]!)) for (const key of k) lookup.push(key);
    }
    if (lookup.length > 0) for (const k of await t.processedKeys(o.targetName, lookup)) plan.seen.add(k);
    return plan;
  }

  /** The stream's last applied version: in this batch, else in the target (0 for none). */
  lastApplied(stream: string): number {
    return this.versions.get(stream) ?? this.applied.get(stream) ?? 0;
  }

  private appliedAlready(e: RecordedEvent): boolean {
    return this.entityVersion && e.version <= this.lastApplied(e.stream);
  }

  /** True when the ledger holds one of the keys, or the entity is at or past the event's version. */
  isDuplicate(e: RecordedEvent, keys: string[]): boolean {
    for (const k of keys) if (this.seen.has(k)) return true;
    return this.appliedAlready(e);
  }

  /** True when the event skips versions of its entity (entity-version guard). */
  hasGap(e: RecordedEvent): boolean {
    return this.entityVersion && e.version > this.lastApplied(e.stream) + 1;
  }

  /** Counts the event as applied in this batch: its keys are seen and its version is the stream's last. */
  markApplied(e: RecordedEvent, keys: string[]): void {
    for (const k of keys) this.seen.add(k);
    if (this.entityVersion) this.versions.set(e.stream, e.version);
  }

  /** Moves the stream's version on without handling an event (one outside the filter, or a duplicate). */
  moveVersion(stream: string, version: number): void {
    this.versions.set(stream, version);
  }
}

/** The event's ledger keys, one per key guard, or the error a guard threw (an event without a command id...). */
export function keysOf<Tx>(o: ResolvedOptions<Tx>, e: RecordedEvent): Keys {
  try {
    return o.guards.keyGuards.map((g) => g.key(e));
  } catch (err) {
    return asError(err);
  }
}

/** Reads the versions between the stream's last applied one and `e` from the store, and says what to do with them. */
export async function planGap<Tx>(
  o: ResolvedOptions<Tx>,
  e: RecordedEvent,
  current: number,
): Promise<GapPlan> {
  const need = e.version - current - 1;
  const missing: RecordedEvent[] = [];
  const read = o.source.readStream?.bind(o.source);
  if (read) for await (const m of read(e.stream, { fromVersion: current + 1, limit: need })) missing.push(m);
  const complete = missing.length === need && missing.every((m, i) => m.version === current + 1 + i);
  if (!complete) {
    const why = read
      ? 'the store does not have the missing versions'
      : 'the source cannot read them (give jetStreamSource a store as recoverFrom)';
    return { kind: 'fatal', error: new VersionGapError(e.stream, current + 1, e.version, why) };
  }
  // Versions outside the consumer's filter are not input it missed: they only move the version on.
  if (!missing.some((m) => matchesFilter(o.filter, m))) return { kind: 'none' };
  if (o.gaps === 'fail')
    return { kind: 'fatal', error: new VersionGapError(e.stream, current + 1, e.version, "gaps: 'fail'") };
  return { kind: 'fill', missing };
}
