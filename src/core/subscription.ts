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
      /** True when these are dead-lettered events delivered again by `deadLetters.retry`. */
      redelivery: boolean;
    }
  | {
      /** Catch-up reached the head that was current when it was checked; live delivery follows. */
      kind: 'caught_up';
      position: number;
    };

export interface ParkInfo {
  /** Why the event is parked, e.g. `handler failed after 5 attempts`. */
  reason: string;
  error?: { name?: string; message: string; stack?: string };
  /** How many times the handler was tried. @default 1 */
  attempts?: number;
}

export const PARK_INFO_KEYS = {
  reason: true,
  error: true,
  attempts: true,
} as const satisfies KnownKeys<ParkInfo>;

/** Reported by a consumer that stops on an error, so that `consumers.get` shows it. */
export interface FailureInfo {
  error: { name?: string; message: string; stack?: string };
  event?: Pick<RecordedEvent, 'id' | 'stream' | 'version' | 'position' | 'type'>;
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
  /** Dead-letters a delivered event: recorded with the error, and later events of its stream park behind it. */
  park(position: number, info: ParkInfo): Promise<void>;
  /** Marks the consumer `failed` with the error and releases the lease; the cursor stays where it is. */
  fail(info: FailureInfo): Promise<void>;
  /** Releases the lease (status `stopped`) and ends iteration. Safe to call twice. */
  close(): Promise<void>;
}

export type ConsumerStatus = 'running' | 'idle' | 'stopped' | 'failed';

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
}

export interface ConsumerAdmin {
  list(): Promise<ConsumerInfo[]>;
  /** `not_found` when the consumer does not exist. */
  get(name: string): Promise<ConsumerInfo>;
  /** Moves the cursor to `position` (back or forward). Refused with `consumer_busy` while owned. */
  reset(name: string, position: number): Promise<void>;
  /** Removes the consumer, its cursor and dead letters. Refused with `consumer_busy` while owned. */
  delete(name: string): Promise<void>;
  /**
   * Ends the consumer's lease now, for operators: the owner is cleared and the epoch moves on, so the
   * old owner's next renewal, ack or park is `fenced`. A consumer with no owner is left as it is.
   * `not_found` when the consumer does not exist.
   */
  release(name: string): Promise<void>;
  /**
   * Consumer groups: records that `member` of group `name` is alive for `ttlMs` (a heartbeat; call
   * it every third of the TTL) and returns the members alive now, sorted, this one included.
   * Members whose heartbeat ran out are removed.
   */
  heartbeatMember?(name: string, member: string, ttlMs: number): Promise<string[]>;
  /** Consumer groups: gives up `member`'s heartbeat at once (a member that stops). */
  leaveGroup?(name: string, member: string): Promise<void>;
}

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

export interface DeadLetterAdmin {
  /** Active entries (parked or retrying) in position order; `all` includes resolved and skipped ones. */
  list(consumer: string, options?: DeadLetterListOptions): Promise<DeadLetter[]>;
  /** Redelivers the entity's parked events in their original order, flagged `redelivery`. Returns how many. */
  retry(consumer: string, selector: DeadLetterSelector): Promise<number>;
  /** Discards the entity's parked events, recording who skipped them. Returns how many. */
  skip(consumer: string, selector: DeadLetterSelector, options?: DeadLetterSkipOptions): Promise<number>;
}
