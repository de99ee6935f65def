import {
  ClosedError,
  ConsumerBusyError,
  ConsumerIdentityConflictError,
  InvalidInputError,
} from '../core/errors.js';
import type { ConsumerAdmin, DeadLetterAdmin, SubscribeOptions, Subscription } from '../core/subscription.js';
import { partitionRecordName } from '../core/consumerGroups.js';
import { filterKey } from '../core/filter.js';
import { EngineConsumerAdmin } from './consumerAdmin.js';
import { checkGroupIdentity } from './groupRecords.js';
import { EngineDeadLetterAdmin } from './deadLetterAdmin.js';
import { DurableSubscription } from './durableSubscription.js';
import type { SubscriptionStateBackend } from './stateBackend.js';
import { resolveSubscribeOptions, type ResolvedSubscribeOptions } from './subscribeOptions.js';
import type { SubscriptionSource } from './subscriptionSource.js';
import { RetryingProbe } from './retryingProbe.js';
import { SharedTail } from './sharedTail.js';
import { Wakeup } from './wakeup.js';

/** How long no subscription waits for appends before other processes' commits are no longer heard. */
const QUIET_MS = 1_000;

export interface SubscriptionServiceOptions {
  /**
   * How often live subscriptions look for appends made by other processes (and for dead letters
   * retried from elsewhere), and how often a standby retries the lease. In-process appends wake
   * subscriptions at once. @default 200
   */
  pollIntervalMs?: number;
}

/**
 * The subscription engine for one store: `subscribe`, `consumers` and `deadLetters` over the store's
 * reads and a state backend. A store creates one, exposes its three members, and calls `close()`
 * before closing its own resources.
 */
export class SubscriptionService {
  readonly consumers: ConsumerAdmin;
  readonly deadLetters: DeadLetterAdmin;
  private readonly pollIntervalMs: number;
  private readonly active = new Set<DurableSubscription>();
  /** Wakes standbys waiting for a lease released in this process. */
  private readonly released = new Wakeup();
  /** Group registrations under way (see `registerPartitions`), by group, definition and start. */
  private readonly registering = new Map<string, Promise<void>>();
  private unhook: (() => void) | undefined;
  private hooked = false;
  private readonly tail: SharedTail | null;
  private readonly retrying: RetryingProbe | null;
  private closed = false;
  /** Subscriptions waiting for appends now; while none does, other processes' commits are not heard. */
  private waiting = 0;
  private quietTimer: NodeJS.Timeout | null = null;
  private readonly hearing = {
    begin: (): void => {
      if (this.waiting++ > 0) return;
      if (this.quietTimer) clearTimeout(this.quietTimer);
      this.quietTimer = null;
      this.source.hearOthers?.(true);
    },
    end: (): void => {
      if (--this.waiting === 0) this.quietSoon();
    },
  };

  constructor(
    private readonly source: SubscriptionSource,
    private readonly backend: SubscriptionStateBackend,
    options: SubscriptionServiceOptions = {},
  ) {
    const poll = options.pollIntervalMs ?? 200;
    if (!Number.isSafeInteger(poll) || poll < 1)
      throw new InvalidInputError('pollIntervalMs', 'must be an integer >= 1');
    this.pollIntervalMs = poll;
    this.consumers = new EngineConsumerAdmin(source, backend, (name, pause) => {
      for (const sub of this.active) if (sub.consumer === name) sub.pauseChanged(pause);
    });
    this.deadLetters = new EngineDeadLetterAdmin(backend, () => this.wakeAll());
    // Reads of the tail are shared for as long as the idle subscriptions take to look at one polling tick.
    this.tail = source.scanKeys
      ? new SharedTail(
          (after, maxScan) => source.scanKeys!(after, maxScan),
          Math.max(1, poll / 10),
          undefined,
          source.streamsMayMatch ? (filter) => source.streamsMayMatch!(filter) : undefined,
          source.firstStreamMatch
            ? (after, prefixes, categories) => source.firstStreamMatch!(after, prefixes, categories)
            : undefined,
        )
      : null;
    this.retrying = backend.retryingConsumers
      ? new RetryingProbe(
          (names) => backend.retryingConsumers!(names),
          () => [...this.active].map((sub) => sub.consumer),
          poll,
        )
      : null;
  }

  /**
   * Hears the store's appends from the first subscription on. Not before: on PostgreSQL the hook is
   * a LISTEN connection, and every commit of every process would wake it (and this process) for
   * nothing while no subscription is open here (a process that only appends).
   */
  private hookAppends(): void {
    if (this.hooked || this.closed) return;
    this.hooked = true;
    this.unhook = this.source.onAppend?.((head) => {
      this.tail?.appended(head);
      for (const s of this.active) s.appended();
    });
    this.quietSoon();
  }

  /**
   * Stops hearing other processes' commits once no subscription has waited for appends for
   * `QUIET_MS`: idle subscriptions rest until the next polling tick whatever is appended, so on
   * PostgreSQL a notification of every commit would cost this process work for nothing.
   */
  private quietSoon(): void {
    if (!this.source.hearOthers || this.quietTimer || this.waiting > 0) return;
    this.quietTimer = setTimeout(() => {
      this.quietTimer = null;
      if (this.waiting === 0 && !this.closed) this.source.hearOthers?.(false);
    }, QUIET_MS);
    this.quietTimer.unref();
  }

  async subscribe(consumer: string, options?: SubscribeOptions): Promise<Subscription> {
    const resolved = resolveSubscribeOptions(consumer, options);
    this.assertOpen();
    this.hookAppends();
    // A partition of a consumer group owns its own record (`<name>#<index>`): cursor, lease, epoch.
    const record = await checkGroupIdentity(this.backend, resolved.consumer, resolved.filter);
    const o = record === resolved.consumer ? resolved : { ...resolved, consumer: record };
    if (o.filter.partition) await this.registerPartitions(resolved.consumer, o);
    else await this.register(o);
    for (;;) {
      const generation = this.released.generation;
      const lease = await this.backend.acquire(o.consumer, o.owner, o.leaseTtlMs);
      if (lease.ok) {
        const blocked = await this.backend.blockedStreams(o.consumer);
        const pause = (await this.backend.get(o.consumer))?.pause ?? null;
        const deps = {
          source: this.source,
          backend: this.backend,
          pollIntervalMs: this.pollIntervalMs,
          onEnd: this.ended,
          tail: this.tail,
          retrying: this.retrying,
          hearing: this.hearing,
        };
        const sub = new DurableSubscription(deps, o, lease.epoch, lease.position, blocked, pause);
        this.active.add(sub);
        if (this.closed || o.signal?.aborted) {
          await sub.close();
          throw new ClosedError(
            this.closed ? 'subscription service' : `subscription of consumer "${o.consumer}"`,
          );
        }
        return sub;
      }
      if (lease.reason === 'not_found') {
        // Deleted between register and acquire: register again.
        await this.register(o);
        continue;
      }
      if (!o.standby) throw new ConsumerBusyError(o.consumer, lease.owner, lease.leaseExpiresAt);
      if (o.signal?.aborted) throw new ClosedError(`standby for consumer "${o.consumer}"`);
      this.assertOpen();
      // Wait for a release in this process, the lease's expiry, or the next poll.
      const untilExpiry = lease.leaseExpiresAt
        ? Date.parse(lease.leaseExpiresAt) - Date.now() + 5
        : this.pollIntervalMs;
      await this.released.wait(generation, Math.max(5, Math.min(this.pollIntervalMs, untilExpiry)));
    }
  }

  /** Closes every subscription opened here (releasing their leases) and stops listening. Safe to call twice. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.quietTimer) clearTimeout(this.quietTimer);
    this.unhook?.();
    this.released.notify();
    await Promise.all([...this.active].map((s) => s.close()));
  }

  private async register(o: ResolvedSubscribeOptions): Promise<void> {
    let start = 0;
    if (o.from !== 'start') {
      const head = await this.source.headPosition();
      start = o.from === 'end' ? head : o.from;
      if (start > head && !(await this.backend.get(o.consumer))) {
        throw new InvalidInputError('from', `must not exceed the head position (${head})`);
      }
    }
    const reg = await this.backend.register(o.consumer, o.filter, start);
    if (!reg.ok) throw new ConsumerIdentityConflictError(o.consumer, reg.existingFilter, o.filter);
  }

  /**
   * Registers every partition of the group at the same start, so that the group's listing shows all
   * of them (with their lag) from the first member on. Registering an existing one changes nothing.
   * Partition 0 goes last: the group is seen (`groupPartitions`) once it exists, so members starting
   * together never see a group with only some of its partitions. The partitions of one definition
   * subscribing at once here (a member starting) share one registration, instead of each
   * registering all of them.
   */
  private registerPartitions(group: string, o: ResolvedSubscribeOptions): Promise<void> {
    const count = o.filter.partition!.count;
    const key = JSON.stringify([group, filterKey({ ...o.filter, partition: { count, index: 0 } }), o.from]);
    let done = this.registering.get(key);
    if (!done) {
      done = this.registerAll(group, o).finally(() => this.registering.delete(key));
      this.registering.set(key, done);
    }
    return done;
  }

  private async registerAll(group: string, o: ResolvedSubscribeOptions): Promise<void> {
    const count = o.filter.partition!.count;
    if (await this.backend.get(partitionRecordName(group, 0))) return;
    for (let index = count - 1; index >= 0; index--) {
      const filter = { ...o.filter, partition: { count, index } };
      await this.register({ ...o, consumer: partitionRecordName(group, index), filter });
    }
  }

  private readonly ended = (sub: DurableSubscription): void => {
    this.active.delete(sub);
    this.released.notify();
  };

  private wakeAll(): void {
    for (const s of this.active) s.wake.notify();
  }

  private assertOpen(): void {
    if (this.closed) throw new ClosedError('subscription service');
  }
}
