/**
 * The state-backend SPI: where a store keeps the durable state of its consumers (registry, cursor,
 * lease, epoch, status) and their dead letters. The subscription engine (`./subscriptionService.ts`)
 * implements the whole `Subscription`, `ConsumerAdmin` and `DeadLetterAdmin` ports on top of this
 * narrow interface plus the store's reads, so a store only has to provide these operations:
 *
 * - memory: `src/memory/subscriptionState.ts` (maps);
 * - SQLite: `src/sqlite/subscriptionState.ts` (tables `idem_consumers`, `idem_dead_letters`);
 * - PostgreSQL: one SQL statement (or one short transaction) per method.
 *
 * Rules every implementation follows:
 * - Each method is atomic: it sees and changes the state as one transaction (a row lock or a
 *   serialised writer), so two processes calling at once get a consistent answer.
 * - Expected outcomes are values (`{ ok: false, ... }`); a thrown error means something unexpected
 *   (I/O, a closed store). The engine turns the values into `ConsumerBusyError`, `FencedError`, ...
 * - Fencing is by epoch alone: an operation that carries an epoch succeeds only while the stored
 *   epoch is that epoch. The epoch increases by one on every successful `acquire`, so a stale
 *   owner's writes are refused even if its lease expired without anybody taking over yet — and an
 *   owner whose lease merely expired (nobody else acquired) may keep renewing and acking.
 * - Times are the backend's clock (PostgreSQL: `now()`; embedded: `Date.now()`), returned as
 *   ISO-8601 UTC strings with milliseconds.
 * - Filters arrive normalised (`normalizeFilter`); compare them with `sameFilter` or by their
 *   `filterKey` text.
 */
import type { RecordedEvent } from '../core/event.js';
import type { EventFilter } from '../core/filter.js';
import type {
  ConsumerPause,
  DeadLetter,
  DeadLetterSelector,
  DeadLetterStatus,
  FailureInfo,
  ParkInfo,
  PauseReason,
  RedrivePolicy,
} from '../core/subscription.js';

/** The status a backend stores; `idle` is derived by the engine from a live lease and zero lag. */
export type StoredConsumerStatus = 'running' | 'stopped' | 'failed';

/** One consumer's durable state as the backend keeps it. */
export interface ConsumerRecord {
  name: string;
  /** Normalised. */
  filter: EventFilter;
  /** Last acknowledged position (0 = nothing yet). */
  position: number;
  /** Owner label of the current or last lease; null once released. */
  owner: string | null;
  /** Fencing token; 0 before the first acquire. */
  epoch: number;
  /** End of the current lease (ISO); null when released. A lease in the past is no lease. */
  leaseExpiresAt: string | null;
  /** `running` while (or since) a lease was taken, `stopped` after release, `failed` after a failure release. */
  status: StoredConsumerStatus;
  lastError: FailureInfo['error'] | null;
  failedEvent: FailureInfo['event'] | null;
  /** Active dead letters (status `parked` or `retrying`). */
  parked: number;
  /** Set while paused; kept across releases and acquires (a pause outlives its owner). */
  pause: ConsumerPause | null;
  createdAt: string;
  updatedAt: string;
}

/**
 * One dead-letter row: the port's `DeadLetter`, whole (the event as it was delivered, so listing
 * needs no read from the log). Keyed by (consumer, event id): an event is dead-lettered at most once
 * per consumer.
 */
export type DeadLetterRecord = DeadLetter;

export type RegisterResult =
  | { ok: true; created: boolean; state: ConsumerRecord }
  | { ok: false; reason: 'identity_conflict'; existingFilter: EventFilter };

export type AcquireResult =
  | { ok: true; epoch: number; position: number; leaseExpiresAt: string }
  | { ok: false; reason: 'busy'; owner: string | null; leaseExpiresAt: string | null }
  | { ok: false; reason: 'not_found' };

/** For every epoch-carrying write: `fenced` when the stored epoch is another (or the consumer is gone). */
export type Fenced = { ok: false; reason: 'fenced'; currentEpoch: number | null };

/** A renewal also reports the stored pause, so that an owner in another process learns of it within a heartbeat. */
export type RenewResult = { ok: true; leaseExpiresAt: string; pause: ConsumerPause | null } | Fenced;
export type WriteResult = { ok: true } | Fenced;
export type AckResult = { ok: true; position: number; resolved: number } | Fenced;

/**
 * An event the consumer gave up on (`Subscription.park`). Stored `parked` (an existing row of the
 * same event is updated: reason, error, attempts, status back to `parked`). `behind` = the earliest
 * other active row of the stream at a lower position, if any. Every active row of the same stream at
 * a later position becomes `parked` (a `retrying` one goes back), and when this event heads the
 * stream (no earlier active row) their `behind` becomes this event's id.
 */
export interface ParkRequest {
  event: RecordedEvent;
  reason: string;
  error: ParkInfo['error'] | null;
  attempts: number;
  /**
   * `failed` only: schedule an automatic redrive. The row keeps its `redrives` count (0 for a new
   * row); `redriveAt` = now + `redriveDelayMs(redrive, redrives)` while `redrives < redrive.max`,
   * else null. Without a policy (and for `behind`), `redriveAt` is null.
   */
  redrive: RedrivePolicy | null;
}

export type ParkResult = { ok: true; record: DeadLetterRecord } | Fenced;

/** `parkBehind`'s answer: for each of its events, in order, whether it is parked. */
export type ParkBehindResult = { ok: true; parked: boolean[] } | Fenced;

/** The reason stored with an event parked behind its stream's dead letter. */
export function behindReason(stream: string): string {
  return `waiting behind an earlier dead-lettered event of stream "${stream}"`;
}

/** A pause to store; the backend adds `since` (its clock). */
export type NewPause = Omit<ConsumerPause, 'since'>;

export type PauseResult =
  { ok: true; changed: boolean; pause: ConsumerPause | null } | { ok: false; reason: 'not_found' };

export type ForceReleaseResult = { ok: true } | { ok: false; reason: 'not_found' };

export type AdminResult =
  | { ok: true }
  | { ok: false; reason: 'busy'; owner: string | null; leaseExpiresAt: string | null }
  | { ok: false; reason: 'not_found' };

/** The port's selectors, and a page of streams for the bulk operations (at most a few hundred). */
export type BackendSelector = DeadLetterSelector | { streams: readonly string[] };

export interface DeadLetterStreamQuery {
  statuses: 'parked' | 'active';
  error?: string;
  after: string | null;
  limit: number;
}

export interface SubscriptionStateBackend {
  /**
   * Creates the consumer at `startPosition` (status `stopped`, epoch 0) or, when it exists, checks its
   * identity: the same normalised filter returns the existing state (`created: false`, start ignored);
   * another filter is `identity_conflict`.
   */
  register(name: string, filter: EventFilter, startPosition: number): Promise<RegisterResult>;

  /**
   * Takes the lease when nobody holds a live one (no owner, or `leaseExpiresAt <= now`): epoch + 1,
   * owner, lease until now + ttl, status `running`, last error cleared. Otherwise `busy` with the holder.
   */
  acquire(name: string, owner: string, ttlMs: number): Promise<AcquireResult>;

  /** Extends the lease to now + ttl while `epoch` is current (even if it had expired meanwhile). */
  renew(name: string, epoch: number, ttlMs: number): Promise<RenewResult>;

  /**
   * Gives the lease up while `epoch` is current: owner and lease cleared, status `stopped`, or
   * `failed` with the failure recorded. The cursor is not touched.
   */
  release(name: string, epoch: number, failure?: FailureInfo): Promise<WriteResult>;

  /**
   * While `epoch` is current: cursor = max(cursor, position) (never back), and every row among
   * `resolveIds` (event ids) whose status is `retrying` becomes `resolved`. `resolved` counts them.
   */
  ack(name: string, epoch: number, position: number, resolveIds: readonly string[]): Promise<AckResult>;

  /** Records a dead letter while `epoch` is current; see `ParkRequest`. */
  park(name: string, epoch: number, request: ParkRequest): Promise<ParkResult>;

  /**
   * While `epoch` is current, in one transaction, parks each of `events` (read by the engine, in
   * position order) behind its stream's dead letter, when the stream still has an active row at a
   * lower position: stored with `behind` = that earliest active row's event id, reason
   * `behindReason`, no error, 0 attempts, and status `retrying` if any active row of the stream is
   * `retrying`, else `parked`. Otherwise nothing is written for it and it is not parked (the stream
   * was retried or skipped meanwhile: the engine delivers it instead), and neither is any later event
   * of its stream among `events`. An event that already has an active row is left as it is, parked.
   */
  parkBehind(name: string, epoch: number, events: readonly RecordedEvent[]): Promise<ParkBehindResult>;

  /**
   * Sets the consumer's pause (`pause`), or lifts it (null); no epoch: operators and owners alike.
   * Setting leaves a stored pause of the same reason as it is (its `since` and `by` stay). With
   * `onlyFrom`, the change applies only while the stored pause has that reason (null: while not
   * paused), so that an outage pause never replaces an operator's and an outage's end never lifts one.
   * `changed` says whether it applied; `pause` is the stored pause afterwards.
   */
  setPause(name: string, pause: NewPause | null, onlyFrom?: PauseReason | null): Promise<PauseResult>;

  get(name: string): Promise<ConsumerRecord | null>;
  /** Every consumer, by name. */
  list(): Promise<ConsumerRecord[]>;

  /** Moves the cursor to `position` (back or forward); refused while a live lease exists. */
  reset(name: string, position: number): Promise<AdminResult>;
  /**
   * The position through which the consumer's target pruned its dedup ledger, as the consumer runtime
   * last reported it (0 when never). `reset` below it is refused by the engine.
   */
  ledgerHorizon(name: string): Promise<number>;
  /** Records the consumer's pruned ledger horizon (replacing the one recorded). */
  setLedgerHorizon(name: string, position: number): Promise<void>;
  /** Removes the consumer, its dead letters and its recorded ledger horizon; refused while a live lease exists. */
  delete(name: string): Promise<AdminResult>;
  /**
   * An operator's forced release: when the consumer has an owner, owner and lease cleared, epoch + 1
   * (so the old owner is fenced), status `stopped` unless `failed`. Nothing changes without an owner.
   */
  forceRelease(name: string): Promise<ForceReleaseResult>;

  /**
   * The consumer's dead letters in position order: active ones (`parked`, `retrying`), or every row
   * with `all`; only `retrying` ones with `status: 'retrying'`; only one stream's with `stream`.
   */
  deadLetters(
    name: string,
    options?: { all?: boolean; status?: DeadLetterStatus; stream?: string; limit?: number },
  ): Promise<DeadLetterRecord[]>;

  /** The streams that have an active dead letter for this consumer. */
  blockedStreams(name: string): Promise<string[]>;

  /**
   * Of `names`, the consumers with a `retrying` dead letter, in one query (the service's safety-net
   * check for retries made by other processes). Without it, each subscription asks on its own.
   */
  retryingConsumers?(names: readonly string[]): Promise<string[]>;

  /**
   * Up to `limit` streams, in name order after `after` (null: from the first), with a row in
   * `statuses` (`parked` alone, or `active`: parked or retrying); with `error`, only streams with
   * such a row whose error has `code` or `name` equal to it or a message containing it. One query.
   */
  deadLetterStreams(name: string, query: DeadLetterStreamQuery): Promise<string[]>;

  /**
   * Marks the selected entities' `parked` rows `retrying` (selector `{ id }`: the stream of that
   * event's row; `{ streams }`: each of them). Returns how many changed; 0 when nothing matched.
   */
  retry(name: string, selector: BackendSelector): Promise<number>;

  /** Marks the selected entities' active rows `skipped` with `by` and the time. Returns how many. */
  skip(name: string, selector: BackendSelector, by: string): Promise<number>;

  /**
   * Automatic redrive: for every stream with a `parked` row whose `redriveAt` has passed, that row's
   * `redrives` + 1 and `redriveAt` null, and every `parked` row of the stream `retrying`. Returns how
   * many rows became `retrying`. One transaction.
   */
  redriveDue(name: string): Promise<number>;
}
