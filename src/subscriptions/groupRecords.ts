import { partitionRecordName, recordKind } from '../core/consumerGroups.js';
import { ConsumerIdentityConflictError } from '../core/errors.js';
import type { EventFilter } from '../core/filter.js';
import type { ConsumerRecord, SubscriptionStateBackend } from './stateBackend.js';

/** A consumer group's partition records, by index; null when `name` has none. */
export async function groupPartitions(
  backend: SubscriptionStateBackend,
  name: string,
): Promise<ConsumerRecord[] | null> {
  // The first partition exists as soon as any member registered (they register every partition).
  if (!(await backend.get(partitionRecordName(name, 0)))) return null;
  const out: { index: number; record: ConsumerRecord }[] = [];
  for (const r of await backend.list()) {
    const k = recordKind(r.name);
    if (k.kind === 'partition' && k.group === name) out.push({ index: k.index, record: r });
  }
  out.sort((a, b) => a.index - b.index);
  return out.map((p) => p.record);
}

/**
 * Refuses a subscription whose identity clashes with how `name` is registered: a partition of a
 * group when `name` is a consumer without partitions or a group of another count, and a consumer
 * without partitions when `name` is a group. Returns the record name the subscription uses.
 */
export async function checkGroupIdentity(
  backend: SubscriptionStateBackend,
  name: string,
  filter: EventFilter,
): Promise<string> {
  const partition = filter.partition;
  if (!partition) {
    const anchor = await backend.get(partitionRecordName(name, 0));
    if (anchor) throw new ConsumerIdentityConflictError(name, anchor.filter, filter);
    return name;
  }
  const plain = await backend.get(name);
  if (plain) throw new ConsumerIdentityConflictError(name, plain.filter, filter);
  const anchor = await backend.get(partitionRecordName(name, 0));
  if (anchor && anchor.filter.partition?.count !== partition.count) {
    throw new ConsumerIdentityConflictError(name, anchor.filter, filter);
  }
  return partitionRecordName(name, partition.index);
}
