/**
 * How a consumer group keeps its state in the store: one consumer record per partition, named
 * `<name>#<index>` (with the group's filter plus `partition: { count, index }`, so a partition's
 * cursor, lease, epoch and dead letters are its own and another count is an identity conflict), and
 * one record per live member, `<name>#member:<id>`, whose lease is the member's heartbeat. `#` is
 * outside the consumer-name alphabet, so these names never collide with a consumer's own.
 */
export const GROUP_SEPARATOR = '#';
const MEMBER_TAG = 'member:';

/** The store record of partition `index` of group `name`. */
export function partitionRecordName(name: string, index: number): string {
  return `${name}${GROUP_SEPARATOR}${index}`;
}

/** The store record of member `member` of group `name`. */
export function memberRecordName(name: string, member: string): string {
  return `${name}${GROUP_SEPARATOR}${MEMBER_TAG}${member}`;
}

/** What a store record name is: a consumer's own, a group's partition, or a group's member. */
export type RecordKind =
  | { kind: 'consumer'; name: string }
  | { kind: 'partition'; group: string; index: number }
  | { kind: 'member'; group: string; member: string };

export function recordKind(record: string): RecordKind {
  const at = record.indexOf(GROUP_SEPARATOR);
  if (at < 0) return { kind: 'consumer', name: record };
  const group = record.slice(0, at);
  const rest = record.slice(at + 1);
  if (rest.startsWith(MEMBER_TAG)) return { kind: 'member', group, member: rest.slice(MEMBER_TAG.length) };
  return { kind: 'partition', group, index: Number(rest) };
}

/** Partitions a member may hold: an even share, rounded up. */
export function partitionShare(count: number, members: number): number {
  return Math.ceil(count / Math.max(1, members));
}
