import type { ConsumerTarget } from '../core/consumerTarget.js';
import { IdemError } from '../core/errors.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';
import type { EventStore } from '../core/eventStore.js';
import { validateConsumerName } from '../core/validation.js';
import { parseVersionedName } from '../core/versionedName.js';
import { withOutbox } from './outbox.js';
import type { LedgerReset } from '../core/effectOutbox.js';
import type { ActiveVersionRecord, ConsumerVersionRecord } from '../core/effectTypes.js';

/** Thrown by `promoteConsumer` while the version has not caught up (code `unavailable`: try again later). */
export class NotCaughtUpError extends IdemError {
  constructor(consumer: string, position: number, next: number, head: number) {
    super(
      'unavailable',
      `consumer "${consumer}" has not caught up: its cursor is at ${position}, the next matching event is at ${next} (head ${head}); promote it once it has`,
      { consumer, position, next, head },
    );
    this.name = 'NotCaughtUpError';
  }
}

export interface PromoteOptions<Tx> {
  source: EventStore;
  target: ConsumerTarget<Tx>;
  /** The version readers should use from now on, e.g. `billing_v3`. */
  name: string;
}

const PROMOTE_OPTION_KEYS = {
  source: true,
  target: true,
  name: true,
} as const satisfies KnownKeys<PromoteOptions<unknown>>;

/** How far a consumer version is from the head: the next event it has to handle, if any. */
export async function catchUpState(
  source: EventStore,
  name: string,
): Promise<{ position: number; head: number; next: number | null }> {
  const info = await source.consumers.get(name);
  const head = await source.headPosition();
  // A group: each partition's cursor against its own events (the lowest cursor is behind events
  // that the other partitions have handled).
  const cursors = info.partitions
    ? info.partitions.map((p) => ({
        after: p.position,
        filter: { ...info.filter, partition: { count: info.partitions!.length, index: p.index } },
      }))
    : [{ after: info.position, filter: info.filter }];
  let next: number | null = null;
  for (const { after, filter } of cursors) {
    for await (const e of source.readAll({ after, filter, limit: 1 })) {
      if (e.position <= head && (next === null || e.position < next)) next = e.position;
      break;
    }
  }
  return { position: info.position, head, next };
}

/**
 * Records `name` as the version readers use for its base name (`billing` for `billing_v3`), in the
 * target's active-versions table. Refused with `NotCaughtUpError` while the version's cursor is behind
 * an event it must handle (up to the store's head now).
 */
export async function promoteConsumer<Tx>(options: PromoteOptions<Tx>): Promise<ActiveVersionRecord> {
  checkKnownKeys(options, PROMOTE_OPTION_KEYS, '');
  const name = validateConsumerName(options.name, 'name');
  const state = await catchUpState(options.source, name);
  if (state.next !== null) throw new NotCaughtUpError(name, state.position, state.next, state.head);
  return withOutbox(options.target, (o, tx) =>
    o.setActive(tx, { base: parseVersionedName(name).base, consumer: name, position: state.position }),
  );
}

/** The version readers use for `base` (`billing`), or null when none was promoted. Projections' readers pick their tables by it. */
export async function activeVersion<Tx>(
  target: ConsumerTarget<Tx>,
  base: string,
): Promise<ActiveVersionRecord | null> {
  return withOutbox(target, (o, tx) => o.getActive(tx, parseVersionedName(base).base));
}

/** Every consumer version the target knows (with its live point) and every promoted one. */
export async function listConsumerVersions<Tx>(
  target: ConsumerTarget<Tx>,
): Promise<{ versions: ConsumerVersionRecord[]; active: ActiveVersionRecord[] }> {
  return withOutbox(target, async (o, tx) => ({
    versions: await o.listVersions(tx),
    active: await o.listActive(tx),
  }));
}

/**
 * Deletes the consumer's ledger rows, checkpoint and entity versions in the target; the outbox stays.
 * The next delivery re-applies everything (after `consumer reset`): only safe when the output tables
 * are rebuilt too. Stop the consumer first.
 */
export async function resetLedger<Tx>(target: ConsumerTarget<Tx>, consumer: string): Promise<LedgerReset> {
  const name = validateConsumerName(consumer, 'consumer');
  return withOutbox(target, (o, tx) => o.resetLedger(tx, name));
}
