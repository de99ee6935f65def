import type { ConsumerMonitors } from './consumerMonitors.js';
import type { RecordedEvent } from './event.js';
import type { EventFilter } from './filter.js';
import type { KnownKeys } from './knownKeys.js';

/** Where a consumer that does not exist yet starts. An existing consumer always resumes from its cursor. */
export type StartFrom = 'start' | 'end' | number;

export interface SubscribeOptions {
  /** Which events the consumer wants. Part of the consumer's identity. @default {} (everything) */
  filter?: EventFilter;
  /** Start of a new consumer: before the first event, at the head, or after a position. @default 'start' */
  from?: StartFrom;
  /** Most delivered-but-unacknowledged events; delivery pauses at the limit. @default 1000 */
  maxInFlight?: number;
  /** Most events in one delivered batch. @default 500 */
  batchSize?: number;
  /** Wait as a standby while another subscriber owns the consumer, instead of failing with `consumer_busy`. @default false */
  standby?: boolean;
  /** Lease time to live; the lease is renewed every third of it. @default 10000 */
  leaseTtlMs?: number;
  /** A label for the owner shown by `consumers.get` (host:pid by default). */
  owner?: string;
  /** Aborting it closes the subscription (and stops a standby's wait). */
  signal?: AbortSignal;
}

export const SUBSCRIBE_OPTION_KEYS = {
  filter: true,
  from: true,
  maxInFlight: true,
  batchSize: true,
  standby: true,
  leaseTtlMs: true,
  owner: true,
  signal: true,
} as const satisfies KnownKeys<SubscribeOptions>;

/** What a subscription yields. */
export type SubscriptionMessage =
  | {
      kind: 'events';
      /** In position order. */
      events: RecordedEvent[];
      /**
       * True when these are dead-lettered events delivered again by `deadLetters.retry`, or events a
       * source delivers again at or below positions it delivered before (JetStream redeliveries): the
       * runtime asks its ledger about each instead of skipping those at or below its checkpoint.
       */
      redelivery: boolean;
    }
  | {
      /** Catch-up reached the head that was current when it was checked; live delivery follows. */
      kind: 'caught_up';
      position: number;
    }
  | {
      /**
       * The consumer was paused (`pause` set: nothing new is delivered until it is resumed; events
       * already delivered may still be acknowledged or parked) or resumed (`pause: null`).
       */
      kind: 'paused';
      pause: ConsumerPause | null;
    };

/**
 * Why a consumer is paused: an operator's `consumers.pause` (delivery stops until `resume`), or an
 * outage its runtime detected (the runtime holds back and probes; the engine keeps delivering).
 */
export type PauseReason = 'operator' | 'outage';

export interface ConsumerPause {
  reason: PauseReason;
  /** When it was paused (ISO-8601). */
  since: string;
  /** Who paused it (an operator's label), or null for a runtime's outage pause. */
  by: string | null;
}

export interface ParkInfo {
  /** Why the event is parked, e.g. `handler failed after 5 attempts`. */
  reason: string;
  /** `code`: the error's own code, when it has a string one (an IdemError's, a driver's SQLSTATE...). */
  error?: { name?: string; code?: string; message: string; stack?: string };
  /** How many times the handler was tried. @default 1 */
  attempts?: number;
  /** Retry the entity by itself later: see `RedrivePolicy`. @default none */
  redrive?: RedrivePolicy;
}

/**
 * Automatic redrive of a dead letter: the n-th redrive (n = 0, 1, ...) is due `afterMs * factor^n`
 * after the event was (again) dead-lettered, at most `max` times; each redrive retries the entity
 * (its parked events, in order) as `deadLetters.retry` does. Bounds: `REDRIVE_BOUNDS`.
 */
export interface RedrivePolicy {
  afterMs: number;
  factor: number;
  max: number;
}

export const REDRIVE_POLICY_KEYS = {
  afterMs: true,
  factor: true,
  max: true,
} as const satisfies KnownKeys<RedrivePolicy>;

export const PARK_INFO_KEYS = {
  reason: true,
  error: true,
  attempts: true,
  redrive: true,
} as const satisfies KnownKeys<ParkInfo>;

/** Reported by a consumer that stops on an error, so that `consumers.get` shows it. */
export interface FailureInfo {
  error: { name?: string; message: string; stack?: string };
  event?: Pick<RecordedEvent, 'id' | 'stream' | 'version' | 'position' | 'type'>;
}

/** What `Subscription.park` did besides recording the dead letter. */
export interface ParkResult {
  /**
   * The later events of the stream that were delivered and not acknowledged when the park was
   * applied, after the parked position up to this one, are parked behind it too (the parked position
   * itself when there were none). Events of the stream after it were not delivered then: they are
   * parked before delivery while the stream stays blocked, or delivered as usual once an operator
   * has retried or skipped its dead letters.
   */
  parkedThrough: number;
}

export const FAILURE_INFO_KEYS = { error: true, event: true } as const satisfies KnownKeys<FailureInfo>;

/**
 * A durable subscription: the exclusive owner of a named consumer for as long as its lease lasts.
 * Iterate it for messages; acknowledge with `ack`. Iteration ends when the subscription is closed, and
 * throws `FencedError` when the lease was lost to another owner.
 */
export interface Subscription extends AsyncIterable<SubscriptionMessage> {
  readonly consumer: string;
  /** The fencing token of this ownership; it increases on every takeover. */
  readonly epoch: number;
  /** The consumer's acknowledged position when this subscription took ownership. */
  readonly startPosition: number;
  /**
   * Cumulative acknowledgement: everything delivered at or below `position` is handled. Moves the
   * cursor forward only; a position at or below the cursor is a no-op (but resolves redelivered dead
   * letters at or below it). A position beyond what was delivered is `invalid_input`; a lost lease is `fenced`.
   */
  ack(position: number): Promise<void>;
  /**
   * Dead-letters a delivered event: recorded with the error, and later events of its stream park
   * behind it, including those already delivered and not acknowledged. The result says which of those
   * were: a caller that holds them must not handle them (they come back with the dead letter's retry).
   */
  park(position: number, info: ParkInfo): Promise<ParkResult>;
  /** Marks the consumer `failed` with the error and releases the lease; the cursor stays where it is. */
  fail(info: FailureInfo): Promise<void>;
  /**
   * Records that the owner holds back because of an outage (`true`: pause reason `outage`, unless an
   * operator paused it) or no longer (`false`: lifts an outage pause only). Delivery is not held:
   * the owner itself holds back and probes.
   */
  outage(active: boolean): Promise<void>;
  /** Releases the lease (status `stopped`) and ends iteration. Safe to call twice. */
  close(): Promise<void>;
  /**
   * Sends the consumer's handler-side monitors to where the subscription is held, when that is
   * another process (a remote subscription reports them to its server's `/metrics`). Fire and
   * forget; absent where the monitors are already in the same process.
   */
  report?(monitors: ConsumerMonitors): void;
}

/** `paused` wins over the others while the consumer is paused (see `ConsumerInfo.pause`). */
export type ConsumerStatus = 'running' | 'idle' | 'stopped' | 'failed' | 'paused';

export interface ConsumerInfo {
  name: string;
  filter: EventFilter;
  /** Last acknowledged position. */
  position: number;
  /** The store's head position. */
  head: number;
  /** Matching events after the cursor (an upper bound when counted by position). */
  lag: number;
  /** Seconds since the oldest unacknowledged matching event was recorded; 0 when none. */
  lagSeconds: number;
  status: ConsumerStatus;
  owner: string | null;
  epoch: number;
  leaseExpiresAt: string | null;
  lastError: FailureInfo['error'] | null;
  failedEvent: FailureInfo['event'] | null;
  /** Active dead letters (parked or being retried). */
  parked: number;
  /** Set while the consumer is paused; the status is then `paused`. */
  pause: ConsumerPause | null;
  createdAt: string;
  updatedAt: string;
  /**
   * A consumer group's partitions (`createConsumer({ partitions })`), by index; absent for a
   * consumer without partitions. The group's `position` is then the lowest partition position, `lag`
   * their sum, `epoch` the highest, `owner` the owners joined by `, `, and `parked` their sum.
   */
  partitions?: PartitionInfo[];
  /**
   * Set when lag and status could not be computed for this consumer (for example a filter stored
   * before the filter limits); the other fields are its stored state, lag 0.
   */
  error?: { code: string; message: string };
}

/** One partition of a consumer group, as `consumers.get` shows it. */
export interface PartitionInfo {
  index: number;
  /** The partition's acknowledged position. */
  position: number;
  /** The member holding its lease; null when none holds a live one. */
  owner: string | null;
  epoch: number;
  /** Matching events of the partition after its cursor. */
  lag: number;
  status: ConsumerStatus;
  /**
   * When its owner's lease runs out unless renewed; null when none holds a live one. Shown by
   * `consumers.get`; a member's `status()` leaves it out.
   */
  leaseExpiresAt?: string | null;
}

/** A live member of a consumer group, as `consumers.heartbeatMember` answers. */
export interface GroupMember {
  member: string;
  /**
   * When its heartbeat runs out unless renewed (a member that died stops renewing it); null from a
   * server that answers names only (an older one).
   */
  leaseExpiresAt: string | null;
}

export interface ConsumerAdmin {
  list(): Promise<ConsumerInfo[]>;
  /** `not_found` when the consumer does not exist. */
  get(name: string): Promise<ConsumerInfo>;
  /**
   * Moves the cursor to `position` (back or forward). Refused with `consumer_busy` while owned, and
   * with `invalid_input` below the consumer's pruned ledger horizon (see `setLedgerHorizon`).
   */
  reset(name: string, position: number): Promise<void>;
  /**
   * Records the position through which the consumer's target pruned its dedup ledger (the consumer
   * runtime calls it after a prune): a reset below it would redeliver events the ledger no longer
   * recognises, so `reset` refuses it. Absent on sources that keep no consumer state of their own.
   */
  setLedgerHorizon?(name: string, position: number): Promise<void>;
  /** Removes the consumer, its cursor and dead letters. Refused with `consumer_busy` while owned. */
  delete(name: string): Promise<void>;
  /**
   * Ends the consumer's lease now, for operators: the owner is cleared and the epoch moves on, so the
   * old owner's next renewal, ack or park is `fenced`. A consumer with no owner is left as it is.
   * `not_found` when the consumer does not exist.
   */
  release(name: string): Promise<void>;
  /**
   * Pauses the consumer, stored with it: its owner (now or after any restart) receives nothing new
   * until `resume`; what it has in flight still commits and is acknowledged; the cursor stays.
   * Pausing a paused consumer changes nothing (an outage pause becomes an operator's).
   * `not_found` when the consumer does not exist.
   */
  pause(name: string, options?: ConsumerPauseOptions): Promise<void>;
  /** Lifts a pause (an operator's or an outage's): delivery continues at the cursor. `not_found` when missing. */
  resume(name: string): Promise<void>;
  /**
   * Consumer groups: records that `member` of group `name` is alive for `ttlMs` (a heartbeat; call
   * it every third of the TTL) and returns the members alive now, sorted by id, this one included,
   * with when each one's heartbeat runs out. Members whose heartbeat ran out are removed.
   */
  heartbeatMember?(name: string, member: string, ttlMs: number): Promise<GroupMember[]>;
  /** Consumer groups: gives up `member`'s heartbeat at once (a member that stops). */
  leaveGroup?(name: string, member: string): Promise<void>;
}

export interface ConsumerPauseOptions {
  /** Who pauses it, recorded with the pause. @default user@host */
  by?: string;
}

export const CONSUMER_PAUSE_OPTION_KEYS = { by: true } as const satisfies KnownKeys<ConsumerPauseOptions>;

export type DeadLetterStatus = 'parked' | 'retrying' | 'resolved' | 'skipped';

export interface DeadLetter {
  consumer: string;
  event: RecordedEvent;
  reason: string;
  error: ParkInfo['error'] | null;
  attempts: number;
  status: DeadLetterStatus;
  /** For an event parked behind an earlier one of its stream: that event's id. */
  behind: string | null;
  /** Automatic redrives done so far (see `RedrivePolicy`). */
  redrives: number;
  /** When the next automatic redrive is due; null when none is scheduled. */
  redriveAt: string | null;
  parkedAt: string;
  /** Who skipped it and when, for `skipped` entries. */
  skippedBy: string | null;
  skippedAt: string | null;
}

/** Which dead letters `retry`/`skip` act on: one entity (all of its parked events) or one event's entity. */
export type DeadLetterSelector = { stream: string } | { id: string };

/** Both shapes' keys: a selector with both, or neither, is refused by its own rule. */
export const DEAD_LETTER_SELECTOR_KEYS = { stream: true, id: true } as const satisfies KnownKeys<
  { stream: string } & { id: string }
>;

export interface DeadLetterListOptions {
  /** Include resolved and skipped entries. @default false */
  all?: boolean;
}

export const DEAD_LETTER_LIST_OPTION_KEYS = { all: true } as const satisfies KnownKeys<DeadLetterListOptions>;

export interface DeadLetterSkipOptions {
  /** Who skips them, recorded on the entries. @default user@host */
  by?: string;
}

export const DEAD_LETTER_SKIP_OPTION_KEYS = { by: true } as const satisfies KnownKeys<DeadLetterSkipOptions>;

export interface DeadLetterBulkOptions {
  /**
   * Only entities with a dead letter whose error matches: its `code` or `name` equal to this, or
   * its message containing it. @default every entity with a dead letter
   */
  error?: string;
  /** Most entities to act on (1-1000000). @default all of them */
  limit?: number;
  /** Start after this stream, in stream-name order: the `last` of an earlier call, to go on from there. */
  after?: string;
  /** Called after each page (a few hundred entities, one transaction) with the totals so far. */
  onProgress?: (progress: DeadLetterBulkResult) => void;
}

export const DEAD_LETTER_BULK_OPTION_KEYS = {
  error: true,
  limit: true,
  after: true,
  onProgress: true,
} as const satisfies KnownKeys<DeadLetterBulkOptions>;

export interface DeadLetterBulkSkipOptions extends DeadLetterBulkOptions, DeadLetterSkipOptions {}

export const DEAD_LETTER_BULK_SKIP_OPTION_KEYS = {
  ...DEAD_LETTER_BULK_OPTION_KEYS,
  ...DEAD_LETTER_SKIP_OPTION_KEYS,
} as const satisfies KnownKeys<DeadLetterBulkSkipOptions>;

export interface DeadLetterBulkResult {
  /** Entities (streams) acted on. */
  entities: number;
  /** Dead letters changed (an entity's failed event and those parked behind it). */
  events: number;
  /** The last stream acted on, in name order; null when none. */
  last: string | null;
  /** True when no matching entity is left after `last` (false when the limit stopped it). */
  done: boolean;
}

export interface DeadLetterAdmin {
  /** Active entries (parked or retrying) in position order; `all` includes resolved and skipped ones. */
  list(consumer: string, options?: DeadLetterListOptions): Promise<DeadLetter[]>;
  /** Redelivers the entity's parked events in their original order, flagged `redelivery`. Returns how many. */
  retry(consumer: string, selector: DeadLetterSelector): Promise<number>;
  /** Discards the entity's parked events, recording who skipped them. Returns how many. */
  skip(consumer: string, selector: DeadLetterSelector, options?: DeadLetterSkipOptions): Promise<number>;
  /**
   * `retry` for many entities: every entity with a parked dead letter, or those whose error matches,
   * up to `limit`, in pages (bounded memory whatever their number). Each entity's events are
   * redelivered in their original order.
   */
  retryMany(consumer: string, options?: DeadLetterBulkOptions): Promise<DeadLetterBulkResult>;
  /** `skip` for many entities, as `retryMany` selects them. */
  skipMany(consumer: string, options?: DeadLetterBulkSkipOptions): Promise<DeadLetterBulkResult>;
}
