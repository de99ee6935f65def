import { memberRecordName, recordKind } from '../core/consumerGroups.js';
import {
  ConsumerBusyError,
  ConsumerIdentityConflictError,
  InvalidInputError,
  NotFoundError,
} from '../core/errors.js';
import { checkKnownKeys } from '../core/knownKeys.js';
import { belowHorizon } from '../core/ledgerRetention.js';
import { SUBSCRIBE_BOUNDS } from '../core/limits.js';
import {
  CONSUMER_PAUSE_OPTION_KEYS,
  type ConsumerAdmin,
  type ConsumerInfo,
  type ConsumerPause,
  type ConsumerPauseOptions,
  type ConsumerStatus,
  type GroupMember,
} from '../core/subscription.js';
import { boundedInt, validateConsumerName, validateLabel, validatePosition } from '../core/validation.js';
import { defaultActor } from './actor.js';
import { consumerInfo, leaseLive } from './consumerInfo.js';
import { groupPartitions } from './groupRecords.js';
import { lagsOf, type Lag } from './lag.js';
import type {
  AdminResult,
  ConsumerRecord,
  ForceReleaseResult,
  NewPause,
  PauseResult,
  SubscriptionStateBackend,
} from './stateBackend.js';
import type { SubscriptionSource } from './subscriptionSource.js';

/** Tries at registering a group member's record and taking its lease, each undone by another member's sweep. */
const JOIN_ATTEMPTS = 5;

/** `consumers.*` over a state backend and the store's reads. */
export class EngineConsumerAdmin implements ConsumerAdmin {
  constructor(
    private readonly source: SubscriptionSource,
    private readonly backend: SubscriptionStateBackend,
    /** Tells this process's owner of the consumer, if any, at once (others learn at their next renewal). */
    private readonly paused: (name: string, pause: ConsumerPause | null) => void,
  ) {}

  async list(): Promise<ConsumerInfo[]> {
    const head = await this.source.headPosition();
    const all = await this.backend.list();
    // Consumers without partitions, and each group once (its partitions gathered), by name.
    const states: ConsumerRecord[] = [];
    const groups = new Map<string, ConsumerRecord[]>();
    for (const r of all) {
      const k = recordKind(r.name);
      if (k.kind === 'consumer') states.push(r);
      else if (k.kind === 'partition') {
        const parts = groups.get(k.group) ?? [];
        if (parts.length === 0) groups.set(k.group, parts);
        parts[k.index] = r;
      }
    }
    // Every record's lag at once: consumers registered near each other share one read of the log.
    const now = Date.now();
    const lags = await lagsOf(this.source, all, head, now);
    const out = await Promise.all(
      states.map((s) => consumerInfo(this.source, s, head, lags.get(s.name), now)),
    );
    for (const [name, parts] of groups)
      out.push(await this.groupInfo(name, parts.filter(Boolean), head, lags));
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async get(name: string): Promise<ConsumerInfo> {
    validateConsumerName(name, 'name');
    const head = await this.source.headPosition();
    const state = await this.backend.get(name);
    if (state) return consumerInfo(this.source, state, head);
    const parts = await groupPartitions(this.backend, name);
    if (!parts) throw new NotFoundError('consumer', name);
    return this.groupInfo(name, parts, head);
  }

  /** A group as one consumer: see `ConsumerInfo.partitions`. */
  private async groupInfo(
    name: string,
    parts: ConsumerRecord[],
    head: number,
    known?: Map<string, Lag>,
  ): Promise<ConsumerInfo> {
    const now = Date.now();
    const lags = known ?? (await lagsOf(this.source, parts, head, now));
    const infos = await Promise.all(
      parts.map((s) => consumerInfo(this.source, s, head, lags.get(s.name), now)),
    );
    return groupConsumerInfo(name, infos);
  }

  async reset(name: string, position: number): Promise<void> {
    validateConsumerName(name, 'name');
    validatePosition(position, 'position');
    const head = await this.source.headPosition();
    if (position > head)
      throw new InvalidInputError('position', `must not exceed the head position (${head})`);
    const parts = (await this.backend.get(name)) ? null : await groupPartitions(this.backend, name);
    const records = parts ? parts.map((p) => p.name) : [name];
    for (const record of records) {
      const horizon = await this.backend.ledgerHorizon(record);
      if (position < horizon) throw belowHorizon(name, horizon, 'position', `${position} is`);
    }
    if (!parts) return check(name, await this.backend.reset(name, position));
    // Every partition, or none while one is owned.
    refuseOwned(name, parts);
    for (const p of parts) check(name, await this.backend.reset(p.name, position));
  }

  async setLedgerHorizon(name: string, position: number): Promise<void> {
    // A group's partition keeps its own horizon, under its record name (`billing#3`).
    const kind = recordKind(name);
    validateConsumerName(kind.kind === 'partition' ? kind.group : name, 'name');
    validatePosition(position, 'position');
    await this.backend.setLedgerHorizon(name, position);
  }

  async delete(name: string): Promise<void> {
    validateConsumerName(name, 'name');
    const parts = (await this.backend.get(name)) ? null : await groupPartitions(this.backend, name);
    if (!parts) return check(name, await this.backend.delete(name));
    refuseOwned(name, parts);
    for (const p of parts) check(name, await this.backend.delete(p.name));
    for (const r of await this.backend.list()) {
      const k = recordKind(r.name);
      if (k.kind === 'member' && k.group === name) await this.backend.delete(r.name);
    }
  }

  async release(name: string): Promise<void> {
    validateConsumerName(name, 'name');
    const parts = (await this.backend.get(name)) ? null : await groupPartitions(this.backend, name);
    if (!parts) return check(name, await this.backend.forceRelease(name));
    for (const p of parts) check(name, await this.backend.forceRelease(p.name));
  }

  async pause(name: string, options: ConsumerPauseOptions = {}): Promise<void> {
    validateConsumerName(name, 'name');
    checkKnownKeys(options, CONSUMER_PAUSE_OPTION_KEYS, 'options');
    const by = validateLabel(options.by ?? defaultActor(), 'by');
    await this.setPause(name, { reason: 'operator', by });
  }

  async resume(name: string): Promise<void> {
    validateConsumerName(name, 'name');
    await this.setPause(name, null);
  }

  /** Pauses or resumes a consumer, or every partition of a group. */
  private async setPause(name: string, pause: NewPause | null): Promise<void> {
    const parts = (await this.backend.get(name)) ? null : await groupPartitions(this.backend, name);
    for (const record of parts ? parts.map((p) => p.name) : [name]) {
      const result: PauseResult = await this.backend.setPause(record, pause);
      check(name, result);
      if (result.ok && result.changed) this.paused(record, result.pause);
    }
  }

  async heartbeatMember(name: string, member: string, ttlMs: number): Promise<GroupMember[]> {
    validateConsumerName(name, 'name');
    validateLabel(member, 'member');
    boundedInt(ttlMs, 'ttlMs', SUBSCRIBE_BOUNDS.leaseTtlMs.min, SUBSCRIBE_BOUNDS.leaseTtlMs.max, 0);
    const record = memberRecordName(name, member);
    // Stateless (any server process may answer a remote member): the stored epoch of the member's own lease.
    const state = await this.backend.get(record);
    const renewed = state?.owner === member ? await this.backend.renew(record, state.epoch, ttlMs) : null;
    if (!renewed?.ok) await this.joinAs(record, member, ttlMs);
    const now = Date.now();
    const members: GroupMember[] = [];
    for (const r of await this.backend.list()) {
      const k = recordKind(r.name);
      if (k.kind !== 'member' || k.group !== name) continue;
      if (leaseLive(r, now)) members.push({ member: k.member, leaseExpiresAt: r.leaseExpiresAt! });
      // A member that died: its heartbeat ran out. Removing it is refused if it came back meanwhile.
      else await this.backend.delete(r.name);
    }
    // Its own lease just taken or renewed, should the listing have missed it.
    if (!members.some((m) => m.member === member))
      members.push({ member, leaseExpiresAt: new Date(now + ttlMs).toISOString() });
    return members.sort((a, b) => (a.member < b.member ? -1 : a.member > b.member ? 1 : 0));
  }

  /**
   * Registers the member's record and takes its lease. Another member's sweep deletes records without
   * a live lease, so it may delete this one between the two steps: then both are done again.
   */
  private async joinAs(record: string, member: string, ttlMs: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const reg = await this.backend.register(record, {}, 0);
      if (!reg.ok) throw new ConsumerIdentityConflictError(record, reg.existingFilter, {});
      const lease = await this.backend.acquire(record, member, ttlMs);
      if (lease.ok) return;
      if (lease.reason === 'busy') throw new ConsumerBusyError(record, lease.owner, lease.leaseExpiresAt);
      if (attempt === JOIN_ATTEMPTS) throw new NotFoundError('consumer', record);
    }
  }

  async leaveGroup(name: string, member: string): Promise<void> {
    validateConsumerName(name, 'name');
    validateLabel(member, 'member');
    const record = memberRecordName(name, member);
    const state = await this.backend.get(record);
    if (state?.owner === member && (await this.backend.release(record, state.epoch)).ok)
      await this.backend.delete(record);
  }
}

/** Refuses a group operation while one of its partitions has a live lease. */
function refuseOwned(name: string, parts: ConsumerRecord[]): void {
  const now = Date.now();
  const owned = parts.find((p) => leaseLive(p, now));
  if (owned) throw new ConsumerBusyError(name, owned.owner, owned.leaseExpiresAt);
}

/** A group's partitions (their admin views, by index) as one consumer's view. */
export function groupConsumerInfo(name: string, infos: ConsumerInfo[]): ConsumerInfo {
  const first = infos[0]!;
  const { partition: _partition, ...filter } = first.filter;
  const owners = [...new Set(infos.map((i) => i.owner).filter((o): o is string => o !== null))];
  const statuses = new Set(infos.map((i) => i.status));
  const paused = infos.find((i) => i.pause !== null)?.pause ?? null;
  const status: ConsumerStatus = infos.every((i) => i.status === 'paused')
    ? 'paused'
    : statuses.has('running')
      ? 'running'
      : statuses.has('idle')
        ? 'idle'
        : statuses.has('failed')
          ? 'failed'
          : 'stopped';
  const failed = infos.find((i) => i.lastError !== null);
  const error = infos.find((i) => i.error !== undefined)?.error;
  const expiries = infos.map((i) => i.leaseExpiresAt).filter((t): t is string => t !== null);
  return {
    name,
    filter,
    position: Math.min(...infos.map((i) => i.position)),
    head: first.head,
    lag: infos.reduce((n, i) => n + i.lag, 0),
    lagSeconds: Math.max(...infos.map((i) => i.lagSeconds)),
    status,
    owner: owners.length > 0 ? owners.sort().join(', ') : null,
    epoch: Math.max(...infos.map((i) => i.epoch)),
    leaseExpiresAt: expiries.length > 0 ? expiries.sort()[0]! : null,
    lastError: failed?.lastError ?? null,
    failedEvent: failed?.failedEvent ?? null,
    parked: infos.reduce((n, i) => n + i.parked, 0),
    pause: paused,
    createdAt: infos.map((i) => i.createdAt).sort()[0]!,
    updatedAt: infos
      .map((i) => i.updatedAt)
      .sort()
      .reverse()[0]!,
    partitions: infos.map((i, index) => ({
      index,
      position: i.position,
      owner: i.owner,
      epoch: i.epoch,
      lag: i.lag,
      status: i.status,
      leaseExpiresAt: i.leaseExpiresAt,
    })),
    ...(error ? { error } : {}),
  };
}

function check(name: string, result: AdminResult | ForceReleaseResult | PauseResult): void {
  if (result.ok) return;
  if (result.reason === 'not_found') throw new NotFoundError('consumer', name);
  throw new ConsumerBusyError(name, result.owner, result.leaseExpiresAt);
}
