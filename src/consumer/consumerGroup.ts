import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { partitionRecordName, partitionShare } from '../core/consumerGroups.js';
import { ClosedError, ConsumerIdentityConflictError, IdemError, isIdemError } from '../core/errors.js';
import { sameFilter } from '../core/filter.js';
import { idemStoreOf } from '../core/consumerSource.js';
import type { EventStore } from '../core/eventStore.js';
import type { ConsumerAdmin, PartitionInfo } from '../core/subscription.js';
import { sleep } from '../core/backoff.js';
import type { Consumer } from './consumer.js';
import { Gate } from './gate.js';
import type { ConsumerRuntimeStatus } from './lifecycle.js';
import type { ConsumerMetricsSnapshot, LatencySummary } from './metrics.js';
import type { ResolvedOptions } from './options.js';

/** The default lease TTL of the store's subscriptions (see `SubscribeOptions.leaseTtlMs`). */
const DEFAULT_LEASE_TTL_MS = 10_000;
/** How often `whenCaughtUp` looks at the group's partitions. */
const CAUGHT_UP_POLL_MS = 100;
/**
 * How long after another member's lease runs out a member looks again (so that the store, whose clock
 * may be a little behind, sees it expired); also the shortest pause between two rounds.
 */
const EXPIRY_MARGIN_MS = 25;

/**
 * One member of a consumer group (`createConsumer({ partitions })`). Every third of the lease TTL it
 * renews its heartbeat in the store (`consumers.heartbeatMember`), which answers with the live
 * members; it holds at most `ceil(partitions / members)` partitions: it stops the extra ones (each
 * finishes and acknowledges its batch in flight, then releases its lease) and takes free ones (no
 * live lease: released, or their member died) up to its share. Each partition it holds runs as an
 * ordinary consumer over the partition's filter, with its own subscription, epoch and target
 * checkpoint, so two members never process one partition at once (the store's lease and the target's
 * epoch fence a stale one). The partitions a member holds run concurrently: on PostgreSQL their
 * target transactions use separate pool connections; an SQLite target runs them one at a time.
 *
 * A live member renews its leases every third of the TTL (each then has two thirds of it left), so a
 * lease seen running out before this member's next round belongs to a member that stopped renewing
 * (it died): the next round is then held right after that expiry, and the dead member's partitions are taken as soon as
 * the store lets them go, not up to a third of the TTL later.
 */
export class ConsumerGroupMember<Tx> implements Consumer {
  private readonly held = new Map<number, Consumer>();
  private readonly member: string;
  private readonly ttlMs: number;
  private readonly count: number;
  private loop: Promise<void> | null = null;
  private stopping: Promise<void> | null = null;
  private wake = new AbortController();
  private state: 'created' | 'running' | 'stopped' | 'failed' = 'created';
  private lastError: Error | null = null;
  private members: string[] = [];
  /**
   * The earliest expiry (ms since the epoch) among the leases of others seen in the last round: the
   * other members' heartbeats and, when this member looked for free partitions, the partitions others
   * hold. Infinity when there were none.
   */
  private nextExpiry = Infinity;
  /** Partition runtimes stopped here (a rebalance), kept for their metrics. */
  private readonly retired: ConsumerMetricsSnapshot[] = [];
  /** Bounds the batch transactions of the partitions held at once (`partitionConcurrency`). */
  private readonly gate: Gate | null;

  constructor(
    private readonly o: ResolvedOptions<Tx>,
    private readonly makePartition: (options: ResolvedOptions<Tx>) => Consumer,
  ) {
    this.count = o.partitions ?? 1;
    this.ttlMs = o.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS;
    this.gate = o.partitionConcurrency === null ? null : new Gate(o.partitionConcurrency);
    this.member = `${o.owner ?? `${hostname()}:${process.pid}`}/${randomBytes(4).toString('hex')}`;
  }

  get name(): string {
    return this.o.name;
  }

  /** The idem store the group's records live in. */
  private get store(): EventStore {
    const store = idemStoreOf(this.o.source);
    if (!store)
      throw new IdemError(
        'invalid_input',
        `consumer "${this.o.name}": partitions need an idem store as the source`,
        { field: 'partitions' },
      );
    return store;
  }

  private get admin(): ConsumerAdmin & Required<Pick<ConsumerAdmin, 'heartbeatMember' | 'leaveGroup'>> {
    const admin = this.store.consumers;
    if (!admin.heartbeatMember || !admin.leaveGroup) {
      throw new IdemError(
        'invalid_input',
        `consumer "${this.o.name}": this source does not support consumer groups (partitions)`,
        { field: 'partitions' },
      );
    }
    return admin as ConsumerAdmin & Required<Pick<ConsumerAdmin, 'heartbeatMember' | 'leaveGroup'>>;
  }

  async start(): Promise<void> {
    if (this.state === 'running') return;
    if (this.stopping) await this.stopping;
    this.state = 'running';
    this.lastError = null;
    this.wake = new AbortController();
    try {
      await this.o.target.migrate();
      await this.o.effects?.start();
      await this.checkIdentity();
      // The first round: joins, and takes a share of the free partitions (an identity conflict or a
      // source without groups rejects `start()` here).
      await this.rebalance();
    } catch (err) {
      this.state = 'failed';
      this.lastError = err instanceof Error ? err : new Error(String(err));
      await this.stopPartitions();
      await this.o.effects?.stop();
      throw err;
    }
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    while (this.state === 'running') {
      const round = Math.max(50, Math.floor(this.ttlMs / 3));
      const untilExpiry = this.nextExpiry - Date.now() + EXPIRY_MARGIN_MS;
      await sleep(Math.max(EXPIRY_MARGIN_MS, Math.min(round, untilExpiry)), this.wake.signal);
      if (this.state !== 'running') return;
      try {
        await this.rebalance(untilExpiry < round);
      } catch (err) {
        if (this.state !== 'running') return;
        this.lastError = err instanceof Error ? err : new Error(String(err));
        if (isIdemError(err, 'consumer_identity_conflict') || isIdemError(err, 'closed')) {
          this.state = 'failed';
          await this.stopPartitions();
          return;
        }
        // A store that is briefly unavailable: the next round tries again (the partitions held
        // reconnect on their own).
      }
    }
  }

  /**
   * One round: heartbeat, drop ended partitions, give back extra ones, take free ones up to the share.
   * `expiring`: the round is held for a lease running out, so partitions are likely to be taken: the
   * partitions are listed while the heartbeat runs instead of after it.
   */
  private async rebalance(expiring = false): Promise<void> {
    const listing = expiring ? this.listPartitions() : null;
    // Awaited below, or not needed: a rejection here is the next round's to see.
    listing?.catch(() => undefined);
    const members = await this.admin.heartbeatMember(this.o.name, this.member, this.ttlMs);
    this.members = members.map((m) => m.member);
    this.nextExpiry = earliest(members.filter((m) => m.member !== this.member));
    for (const [index, c] of this.held) {
      const s = c.status().state;
      if (s === 'stopped' || s === 'failed') this.retire(index, c);
    }
    const share = partitionShare(this.count, this.members.length);
    if (this.held.size > share) {
      // Highest indexes first; each commits and acknowledges its batch in flight before releasing.
      const extra = [...this.held.keys()].sort((a, b) => b - a).slice(0, this.held.size - share);
      await Promise.all(
        extra.map(async (index) => {
          const c = this.held.get(index)!;
          await c.stop();
          this.retire(index, c);
        }),
      );
      return;
    }
    if (this.held.size === share) return;
    const free = this.freePartitions(await (listing ?? this.listPartitions()));
    // Started together, as many as the share allows; those another member took first are skipped.
    while (free.length > 0 && this.held.size < share && this.state === 'running') {
      await Promise.all(
        free.splice(0, share - this.held.size).map(async (index) => {
          const c = this.makePartition(this.partitionOptions(index));
          try {
            await c.start();
            this.held.set(index, c);
          } catch (err) {
            if (!isIdemError(err, 'consumer_busy')) throw err;
          }
        }),
      );
    }
  }

  /**
   * Refuses to join a group registered with another partition count or filter, or a consumer of the
   * same name without partitions (each partition's subscription checks it too; this covers a member
   * that finds no free partition to subscribe to).
   */
  private async checkIdentity(): Promise<void> {
    let info;
    try {
      info = await this.store.consumers.get(this.o.name);
    } catch (err) {
      if (isIdemError(err, 'not_found')) return;
      throw err;
    }
    const requested = { ...this.o.filter, partition: { count: this.count, index: 0 } };
    if (info.partitions?.length !== this.count || !sameFilter(info.filter, this.o.filter)) {
      const existing = info.partitions
        ? { ...info.filter, partition: { count: info.partitions.length, index: 0 } }
        : info.filter;
      throw new ConsumerIdentityConflictError(this.o.name, existing, requested);
    }
  }

  /** The group's partitions as the store shows them; undefined before the group has any record. */
  private async listPartitions(): Promise<PartitionInfo[] | undefined> {
    try {
      return (await this.store.consumers.get(this.o.name)).partitions;
    } catch (err) {
      // Before the first member's first subscription the group has no records: every partition is free.
      if (isIdemError(err, 'not_found')) return undefined;
      throw err;
    }
  }

  /**
   * Partitions without a live lease, starting at this member's place among the members so that
   * members joining together reach for different partitions first.
   */
  private freePartitions(partitions: PartitionInfo[] | undefined): number[] {
    const free = partitions
      ? partitions.filter((p) => p.owner === null && !this.held.has(p.index)).map((p) => p.index)
      : Array.from({ length: this.count }, (_, i) => i);
    const others = (partitions ?? []).filter((p) => p.owner !== null && p.owner !== this.member);
    this.nextExpiry = Math.min(this.nextExpiry, earliest(others));
    const place = Math.max(0, this.members.indexOf(this.member));
    const start = Math.floor((place * this.count) / Math.max(1, this.members.length));
    return free.sort(
      (a, b) => ((a - start + this.count) % this.count) - ((b - start + this.count) % this.count),
    );
  }

  private partitionOptions(index: number): ResolvedOptions<Tx> {
    const effects = this.o.effects;
    return {
      ...this.o,
      targetName: partitionRecordName(this.o.name, index),
      partitions: null,
      partitionConcurrency: null,
      batchGate: this.gate,
      filter: { ...this.o.filter, partition: { count: this.count, index } },
      standby: false,
      owner: this.member,
      // The group starts and stops the effect dispatcher once; its partitions only write effects.
      effects:
        effects === null
          ? null
          : Object.assign(Object.create(effects) as typeof effects, {
              start: () => Promise.resolve(),
              stop: () => Promise.resolve(),
            }),
    };
  }

  private retire(index: number, c: Consumer): void {
    if (this.held.get(index) !== c) return;
    this.held.delete(index);
    // Kept as one running total, so that members joining and leaving do not grow the list.
    const total = mergeSnapshots(this.o.name, [...this.retired, c.metrics()]);
    this.retired.length = 0;
    this.retired.push(total);
  }

  private async stopPartitions(): Promise<void> {
    await Promise.all(
      [...this.held].map(async ([index, c]) => {
        await c.stop();
        this.retire(index, c);
      }),
    );
  }

  stop(): Promise<void> {
    if (this.stopping) return this.stopping;
    if (this.state !== 'running') return this.o.effects?.stop() ?? Promise.resolve();
    this.state = 'stopped';
    this.wake.abort();
    this.stopping = (async () => {
      await this.loop?.catch(() => undefined);
      await this.stopPartitions();
      await this.admin.leaveGroup(this.o.name, this.member).catch(() => undefined);
      await this.o.effects?.stop();
    })().finally(() => (this.stopping = null));
    return this.stopping;
  }

  /** This member's partitions, by index. */
  heldPartitions(): number[] {
    return [...this.held.keys()].sort((a, b) => a - b);
  }

  status(): ConsumerRuntimeStatus {
    const parts = [...this.held].sort((a, b) => a[0] - b[0]).map(([index, c]) => ({ index, s: c.status() }));
    const running = parts.some((p) => p.s.state === 'running');
    const s: ConsumerRuntimeStatus = {
      name: this.o.name,
      state:
        this.state === 'running'
          ? running
            ? 'running'
            : 'idle'
          : this.state === 'created'
            ? 'idle'
            : this.state,
      phase:
        this.state === 'running'
          ? parts.every((p) => p.s.phase === 'live') && parts.length > 0
            ? 'live'
            : 'catching_up'
          : this.state === 'created'
            ? 'created'
            : 'done',
      position: parts.length > 0 ? Math.min(...parts.map((p) => p.s.position)) : 0,
      epoch: parts.length > 0 ? Math.max(...parts.map((p) => p.s.epoch)) : 0,
      member: this.member,
      members: [...this.members],
      partitions: parts.map((p) => ({
        index: p.index,
        position: p.s.position,
        owner: this.member,
        epoch: p.s.epoch,
        lag: 0,
        status: p.s.state === 'running' ? 'running' : p.s.state === 'idle' ? 'idle' : p.s.state,
      })),
    };
    if (this.lastError) {
      const e = this.lastError;
      s.lastError = { name: e.name, message: e.message, ...(isIdemError(e) ? { code: e.code } : {}) };
    }
    return s;
  }

  metrics(): ConsumerMetricsSnapshot {
    return mergeSnapshots(this.o.name, [...this.retired, ...[...this.held.values()].map((c) => c.metrics())]);
  }

  /**
   * Resolves once every partition of the group (whoever holds it) has acknowledged everything that
   * matches up to the head at call time; rejects if this member stops or fails first.
   */
  async whenCaughtUp(options: { timeoutMs?: number } = {}): Promise<void> {
    const head = await this.o.source.headPosition();
    const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
    for (;;) {
      if (this.state === 'stopped' || this.state === 'failed') {
        throw this.lastError ?? new ClosedError(`consumer "${this.o.name}"`);
      }
      const info = await this.store.consumers.get(this.o.name).catch(() => null);
      const parts = info?.partitions;
      if (parts && parts.length === this.count && parts.every((p) => p.position >= head || p.lag === 0))
        return;
      if (Date.now() > deadline) {
        throw new IdemError(
          'unavailable',
          `consumer "${this.o.name}" did not catch up with position ${head} within ${options.timeoutMs} ms`,
        );
      }
      await sleep(CAUGHT_UP_POLL_MS);
    }
  }
}

/** The earliest of the leases' expiries, in ms since the epoch; Infinity without any. */
function earliest(leases: readonly { leaseExpiresAt?: string | null }[]): number {
  let first = Infinity;
  for (const l of leases) {
    const at = l.leaseExpiresAt ? Date.parse(l.leaseExpiresAt) : NaN;
    if (at < first) first = at;
  }
  return first;
}

function addLatency(a: LatencySummary, b: LatencySummary): LatencySummary {
  const count = a.count + b.count;
  const sumSeconds = a.sumSeconds + b.sumSeconds;
  return {
    count,
    sumSeconds,
    maxSeconds: Math.max(a.maxSeconds, b.maxSeconds),
    meanSeconds: count ? sumSeconds / count : 0,
  };
}

/** The partitions' metrics as one consumer's: counters added, the lowest position, the highest head. */
function mergeSnapshots(consumer: string, all: ConsumerMetricsSnapshot[]): ConsumerMetricsSnapshot {
  const zero: LatencySummary = { count: 0, sumSeconds: 0, maxSeconds: 0, meanSeconds: 0 };
  const out: ConsumerMetricsSnapshot = {
    consumer,
    delivered: 0,
    processed: 0,
    duplicates: 0,
    repeatRate: 0,
    gaps: 0,
    recovered: 0,
    deadLetters: 0,
    parked: 0,
    parkedEntities: 0,
    paused: false,
    reconnects: 0,
    batches: 0,
    handlerLatency: zero,
    endToEndLatency: zero,
    position: 0,
    head: 0,
    checkpointLag: { events: 0, seconds: 0 },
  };
  for (const [i, m] of all.entries()) {
    for (const k of [
      'delivered',
      'processed',
      'duplicates',
      'gaps',
      'recovered',
      'deadLetters',
      'parked',
      'parkedEntities',
      'reconnects',
      'batches',
    ] as const)
      out[k] += m[k];
    out.paused ||= m.paused;
    out.handlerLatency = addLatency(out.handlerLatency, m.handlerLatency);
    out.endToEndLatency = addLatency(out.endToEndLatency, m.endToEndLatency);
    out.position = i === 0 ? m.position : Math.min(out.position, m.position);
    out.head = Math.max(out.head, m.head);
    out.checkpointLag = {
      events: Math.max(out.checkpointLag.events, m.checkpointLag.events),
      seconds: Math.max(out.checkpointLag.seconds, m.checkpointLag.seconds),
    };
  }
  out.repeatRate = out.delivered ? out.duplicates / out.delivered : 0;
  return out;
}
