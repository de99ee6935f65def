import type { Registry } from 'prom-client';
import type { ConsumerTarget } from '../core/consumerTarget.js';
import { InvalidInputError } from '../core/errors.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';
import type { RecordedEvent } from '../core/event.js';
import type { JsonValue } from '../core/json.js';
import type { ConsumerSource } from '../core/consumerSource.js';
import { normalizeFilter, type EventFilter } from '../core/filter.js';
import type { RedrivePolicy, StartFrom } from '../core/subscription.js';
import {
  MAX_BATCH_SIZE,
  MAX_IN_FLIGHT,
  MAX_LEASE_TTL_MS,
  MIN_LEASE_TTL_MS,
  REDRIVE_BOUNDS,
} from '../core/limits.js';
import { parseDuration } from '../core/duration.js';
import { validateRedrivePolicy } from '../core/parkInfo.js';
import { boundedInt, validateConsumerName } from '../core/validation.js';
import { MAX_PARTITIONS } from '../core/streamHash.js';
import { compileUpcasters, type Upcasters } from '../core/upcasters.js';
import { resolveLedgerOptions, type LedgerOptions, type ResolvedRetain } from '../core/ledgerRetention.js';
import { normalizeGuards, type Guard, type GuardSet } from './guards.js';
import { upcastingSource } from './upcastingSource.js';
import type { Gate } from './gate.js';
import {
  resolveConsumerEffects,
  type ConsumerEffects,
  type ConsumerEffectsOptions,
} from '../effects/consumerEffects.js';
import type { EffectCallOptions, EffectWrite } from '../core/effectTypes.js';

/**
 * Event types to the shape of their `data`, e.g. `{ 'invoice.issued': { amount: number } }`: given to
 * `createConsumer<Tx, Events>`, it types `filter.types` and the events handlers get.
 */
export type EventMap = object;

/** The default event map: any type, any data (handlers get `RecordedEvent`). */
export type AnyEvents = Record<string, JsonValue>;

/** A recorded event of one of the map's types, its `data` typed; `RecordedEvent` for `AnyEvents`. */
export type EventOf<M extends EventMap> = string extends keyof M
  ? RecordedEvent
  : {
      [K in keyof M & string]: Omit<RecordedEvent, 'type' | 'data'> & { type: K; data: M[K] };
    }[keyof M & string];

/** A filter whose `types` are names of the event map (any filter for `AnyEvents`). */
export type EventFilterOf<M extends EventMap> = string extends keyof M
  ? EventFilter
  : Omit<EventFilter, 'types'> & { types: readonly (keyof M & string)[] };

/** What every handler gets besides its events. */
export interface BaseHandlerContext<Tx> {
  /** The target's open transaction: a better-sqlite3 `Database` (SQLite) or a `pg` client inside BEGIN (PostgreSQL). */
  readonly tx: Tx;
  /** The consumer's name. */
  readonly consumer: string;
  /** 1 on the first try, 2 on the first retry, ... */
  readonly attempt: number;
  /** True when the events are dead letters delivered again by `deadLetters.retry`, or a source's redelivery (see `SubscriptionMessage`). */
  readonly redelivery: boolean;
  /**
   * Adds `amount` (default 1) to a counter in the target unless `member` (e.g. the event id) was counted
   * already: an additive metric that cannot double, even across consumer versions. Returns whether it counted.
   */
  addOnce(counter: string, member: string, amount?: number): Promise<boolean>;
  /** The consumer's version from its name (`billing_v3` -> 3), or null for an unversioned name. */
  readonly version: number | null;
  /** What a versioned projection appends to its table names: `_v3` for `billing_v3`, '' without a version. */
  readonly tableSuffix: string;
}

/** What `onShred` gets besides the stream. */
export interface ShredContext<Tx> {
  /** The target's open transaction, as `ctx.tx` of handlers. */
  readonly tx: Tx;
  /** The consumer's name. */
  readonly consumer: string;
  /** The subject whose key was deleted. */
  readonly subject: string;
  /** The consumer's version from its name (`billing_v3` -> 3), or null for an unversioned name. */
  readonly version: number | null;
  /** What a versioned projection appends to its table names: `_v3` for `billing_v3`, '' without a version. */
  readonly tableSuffix: string;
}

/** What a handler gets besides the event. */
export interface HandlerContext<Tx> extends BaseHandlerContext<Tx> {
  /** True when the event was read from the store to fill a version gap (entity-version guard). */
  readonly recovered: boolean;
  /**
   * Records an external effect in the target's outbox, in this transaction, keyed by (scope, key) with
   * `key` defaulting to `${event.id}:${kind}`: a redelivered event writes nothing new. A dispatcher
   * calls the effect's handler after the commit. See docs/effects-and-replay.md.
   */
  effect(kind: string, payload: unknown, options?: EffectCallOptions): Promise<EffectWrite>;
}

export type Handler<Tx, M extends EventMap = AnyEvents> = (
  event: EventOf<M>,
  ctx: HandlerContext<Tx>,
) => void | Promise<void>;

/** What a batch handler gets besides the events. */
export interface BatchHandlerContext<Tx, M extends EventMap = AnyEvents> extends BaseHandlerContext<Tx> {
  /** 1 while events are handled together; 2, 3... when one event is retried alone after it failed. */
  readonly attempt: number;
  /** Positions of the events that were read from the store to fill a version gap (entity-version guard). */
  readonly recovered: ReadonlySet<number>;
  /** As `HandlerContext.effect`, for one of the events (its id is the default key). */
  effect(
    event: EventOf<M>,
    kind: string,
    payload: unknown,
    options?: EffectCallOptions,
  ): Promise<EffectWrite>;
}

/**
 * A handler of several events at once, in position order, after the guards removed duplicates: for
 * set-shaped writes (one statement per batch). If it throws, the runtime isolates the failing event
 * (see docs/consumers.md, "Batch handlers") and `onError` applies to that event alone.
 */
export type BatchHandler<Tx, M extends EventMap = AnyEvents> = (
  events: EventOf<M>[],
  ctx: BatchHandlerContext<Tx, M>,
) => void | Promise<void>;

/** `handle` or `handleBatch`: one of them, never both. */
export type HandlerOption<Tx, M extends EventMap = AnyEvents> =
  | {
      /** Handles one event. */
      handle: Handler<Tx, M>;
      handleBatch?: never;
    }
  | {
      /** Handles the new events of a batch in one call. */
      handleBatch: BatchHandler<Tx, M>;
      handle?: never;
    };

export interface ErrorPolicy {
  /** Tries per event, the first included. @default 3 */
  attempts?: number;
  /** @default 'exponential' (with jitter) */
  backoff?: 'exponential' | 'none';
  /** Delay before the first retry, in ms; doubles per retry. @default 100 */
  initialDelayMs?: number;
  /** Longest delay between retries, in ms. @default 5000 */
  maxDelayMs?: number;
  /** What to do when the attempts are used up: stop the consumer (cursor stays before the event) or dead-letter the event. @default 'stop' */
  then?: 'stop' | 'dead-letter';
  /**
   * With `then: 'dead-letter'`: retry a dead-lettered entity by itself, its events in order, after
   * `after`, then after `after * factor`, `after * factor^2`, ..., at most `max` times. Each redrive
   * is counted on the dead letter (`redrives`, `redriveAt` in `deadLetters.list`). @default none
   */
  redrive?: RedriveOption;
  /**
   * Outage detection: when handlers fail for many distinct entities in a short window, the consumer
   * pauses itself (status `paused`, reason `outage`) instead of dead-lettering them all, probes with
   * one event on a backoff and resumes by itself once it succeeds. @default on: see `OutageOption`
   */
  outage?: OutageOption | false;
}

export interface RedriveOption {
  /** The first delay: ms, or a text like `'30s'`, `'5m'`, `'1h'` (100 ms to 30 days). */
  after: number | string;
  /** Each later delay is the previous one times this (1-10). @default 2 */
  factor?: number;
  /** Most redrives per dead letter (1-100). @default 5 */
  max?: number;
}

const REDRIVE_OPTION_KEYS = {
  after: true,
  factor: true,
  max: true,
} as const satisfies KnownKeys<RedriveOption>;

export interface OutageOption {
  /** Distinct entities failing within `window` that make an outage (2-10000). @default 10 */
  entities?: number;
  /** The window: ms or a text like `'30s'` (100 ms to 1 hour). @default '30s' */
  window?: number | string;
  /**
   * How long failures are held while no new entity fails: an entity whose event failed for good is
   * held (not dead-lettered) while an outage may be forming, and dead-lettered as poison once the
   * streak has not grown for `hold` (ms or text, 10 ms to 1 hour). An event of another entity handled
   * meanwhile makes it poison at once. @default '1s'
   */
  hold?: number | string;
  /** First delay between probes: ms or text (10 ms to 1 hour); doubles up to `maxProbeDelay`. @default '1s' */
  probeDelay?: number | string;
  /** Longest delay between probes (at least `probeDelay`, at most 1 hour). @default '60s' */
  maxProbeDelay?: number | string;
}

const OUTAGE_OPTION_KEYS = {
  entities: true,
  window: true,
  hold: true,
  probeDelay: true,
  maxProbeDelay: true,
} as const satisfies KnownKeys<OutageOption>;

const ERROR_POLICY_KEYS = {
  attempts: true,
  backoff: true,
  initialDelayMs: true,
  maxDelayMs: true,
  then: true,
  redrive: true,
  outage: true,
} as const satisfies KnownKeys<ErrorPolicy>;

export interface BatchOptions {
  /** Most events in one target transaction once live, and the size of each page read from the source (1-5000). @default 500 */
  size?: number;
  /**
   * Most events in one target transaction while catching up (from the start of a subscription until
   * the source says it caught up): the pages read are merged, so a long catch-up commits, acks and
   * writes each B-tree page of the target less often. Set it to `size` to commit page by page.
   * After a batch fails with an error that ends the subscription (a lost connection, a failed
   * commit), the next catch-up transactions are halved, down to `size`, and doubled back after
   * each commit. At most 20000.
   * @default the larger of 2000 and `size`
   */
  catchUpSize?: number;
  /** How long to wait for more events to fill a batch once one has arrived, in ms. @default 0 (process what is delivered) */
  maxWaitMs?: number;
}

const BATCH_OPTION_KEYS = {
  size: true,
  catchUpSize: true,
  maxWaitMs: true,
} as const satisfies KnownKeys<BatchOptions>;

export interface ConsumerMetricsOptions {
  /** A prom-client registry to register the consumer metrics in (shared metrics, labelled by `consumer`). */
  registry: Registry;
  /** Metric name prefix. @default 'idem_consumer_' */
  prefix?: string;
}

const METRICS_OPTION_KEYS = {
  registry: true,
  prefix: true,
} as const satisfies KnownKeys<ConsumerMetricsOptions>;

/** The consumer options besides the handler and the filter. */
export interface ConsumerBaseOptions<Tx> {
  /** The consumer's identity: versioned, e.g. `billing_v2`. */
  name: string;
  /**
   * Where events come from: any idem store (embedded, PostgreSQL, remote) or `jetStreamSource` from
   * `idem/nats`. Uses `subscribe`, `headPosition`, and `readStream` (gap recovery) when it has one.
   */
  source: ConsumerSource;
  /** Where output, ledger, entity versions and checkpoint commit together. */
  target: ConsumerTarget<Tx>;
  /** How duplicates are recognised; an array combines guards. @default 'event-id' */
  guard?: Guard | Guard[];
  onError?: ErrorPolicy;
  /**
   * Version gaps (entity-version guard): read the missing versions from the source and apply them, or
   * fail; or `'wait'`: hold only that entity's events (uncommitted, unacknowledged) until the missing
   * versions arrive, for a source that may deliver an entity out of order, and after `gapWaitMs`
   * recover as `'recover'` does. @default 'recover'
   */
  gaps?: 'recover' | 'fail' | 'wait';
  /** How long `gaps: 'wait'` holds an entity before recovering its gap (1-3,600,000 ms). @default 10000 */
  gapWaitMs?: number;
  batch?: BatchOptions;
  /** Wait as a standby while another process owns the consumer, instead of rejecting `start()`. @default false */
  standby?: boolean;
  /** Where a new consumer starts. @default 'start' */
  from?: StartFrom;
  /** Lease time to live of the subscription, in ms (1000-300000). @default the store's (10000) */
  leaseTtlMs?: number;
  /** A label for this owner shown by `consumers.get`. @default host:pid */
  owner?: string;
  metrics?: ConsumerMetricsOptions;
  /** Reconnect delays after a source or target failure: first and largest, in ms. @default { initialDelayMs: 100, maxDelayMs: 5000 } */
  reconnect?: { initialDelayMs?: number; maxDelayMs?: number };
  /** Effect outbox settings: handlers for a dispatcher started with the consumer, replay policy, scope. */
  effects?: ConsumerEffectsOptions<Tx>;
  /**
   * Applied to the events this consumer receives (and reads to fill gaps), before the guards, on top of
   * any the source applies; see `Upcasters`. Lets a new consumer version read old event shapes.
   */
  upcasters?: Upcasters;
  /**
   * Ledger retention: prune the target's dedup ledger rows the acknowledged checkpoint covers, keeping
   * `'checkpoint'` (none), `{ events: N }` or `{ age: '30d' }`. See docs/data-lifecycle.md.
   * @default the ledger keeps every row
   */
  ledger?: LedgerOptions;
  /**
   * Makes the consumer a group of this many partitions (1-256) by the stream hash: every process
   * that starts the definition is a member, members share the partitions, each partition keeps its
   * own cursor, lease, epoch and target checkpoint. Part of the identity. See docs/consumer-groups.md.
   */
  partitions?: number;
  /**
   * With `partitions`: how many of the partitions this member holds run a batch transaction at once
   * (1-256); the others wait their turn between batches, still holding their leases. Many concurrent
   * short transactions on a small machine cost CPU per event (context switches between as many
   * database backends, contention on the same pages); a handler that waits on something else (a
   * remote call) wants them all concurrent. Not part of the identity: members may differ.
   * @default every partition held
   */
  partitionConcurrency?: number;
  /**
   * Crypto-shredding: called for each stream in which `store.shred(subject)` erased events, in a
   * target transaction that also deletes the stream's entity version and ledger rows, so that the
   * projection can delete the subject's rows. Runs between batches, within about a second of the
   * shred while the consumer runs (or when it starts). See docs/data-lifecycle.md.
   */
  onShred?: (stream: string, ctx: ShredContext<Tx>) => void | Promise<void>;
}

/**
 * Which events the consumer wants; part of its identity. @default {} (everything). With an event map,
 * `types` is required and names only the map's types, so that handlers get only events of the map.
 */
export type FilterOption<M extends EventMap> = string extends keyof M
  ? { filter?: EventFilter }
  : { filter: EventFilterOf<M> };

/**
 * Everything `createConsumer` takes: `Tx` is the target's transaction (`ctx.tx`), `M` an optional
 * event map that types `filter.types` and the events handlers get.
 */
export type ConsumerOptions<Tx, M extends EventMap = AnyEvents> = ConsumerBaseOptions<Tx> &
  FilterOption<M> &
  HandlerOption<Tx, M>;

export const CONSUMER_OPTION_KEYS = {
  name: true,
  source: true,
  filter: true,
  target: true,
  guard: true,
  handle: true,
  handleBatch: true,
  onError: true,
  gaps: true,
  gapWaitMs: true,
  batch: true,
  standby: true,
  from: true,
  leaseTtlMs: true,
  owner: true,
  metrics: true,
  reconnect: true,
  effects: true,
  upcasters: true,
  ledger: true,
  partitions: true,
  partitionConcurrency: true,
  onShred: true,
} as const satisfies KnownKeys<
  ConsumerBaseOptions<unknown> & { filter?: unknown; handle?: unknown; handleBatch?: unknown }
>;

const RECONNECT_OPTION_KEYS = { initialDelayMs: true, maxDelayMs: true } as const satisfies KnownKeys<
  NonNullable<ConsumerBaseOptions<unknown>['reconnect']>
>;

export interface ResolvedOptions<Tx> {
  name: string;
  /**
   * Whose checkpoint, ledger and entity versions the target keeps: the name, or for a partition of
   * a group the partition's record name (`billing#3`), so that fencing works per partition.
   */
  targetName: string;
  /** The group's partition count; null for a consumer without partitions. */
  partitions: number | null;
  /** With `partitions`: the most batch transactions this member's partitions run at once; null for all. */
  partitionConcurrency: number | null;
  /** Shared by a group member's partitions: entered around each batch (null: no limit). */
  batchGate: Gate | null;
  source: ConsumerSource;
  filter: EventFilter;
  target: ConsumerTarget<Tx>;
  guards: GuardSet;
  /** Exactly one of `handle` and `handleBatch` is set. */
  handle: Handler<Tx> | null;
  handleBatch: BatchHandler<Tx> | null;
  onError: Required<Omit<ErrorPolicy, 'redrive' | 'outage'>> & {
    redrive: RedrivePolicy | null;
    outage: ResolvedOutage | null;
  };
  gaps: 'recover' | 'fail' | 'wait';
  gapWaitMs: number;
  batch: Required<BatchOptions>;
  standby: boolean;
  from: StartFrom;
  leaseTtlMs: number | undefined;
  owner: string | undefined;
  metrics: ConsumerMetricsOptions | undefined;
  reconnect: { initialDelayMs: number; maxDelayMs: number };
  /** null when the target has no outbox (and no `effects` option was given). */
  effects: ConsumerEffects<Tx> | null;
  /** The ledger retention policy; null keeps every row. */
  ledger: ResolvedRetain | null;
  /** Called for each shredded stream the consumer owns; null forgets only the runtime's rows. */
  onShred: ((stream: string, ctx: ShredContext<Tx>) => void | Promise<void>) | null;
}

function intOption(value: unknown, field: string, min: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw new InvalidInputError(field, `must be an integer >= ${min}`);
  }
  return value;
}

/** The default most events per transaction while catching up (see `BatchOptions.catchUpSize`). */
export const DEFAULT_CATCH_UP_BATCH = 2000;
/**
 * The largest `catchUpSize`: the runtime subscribes with room for two catch-up batches and two
 * deliveries, which stays within the subscription's `MAX_IN_FLIGHT`.
 */
export const MAX_CATCH_UP_BATCH = (MAX_IN_FLIGHT - 2 * MAX_BATCH_SIZE) / 2;

function resolveBatch(batch: BatchOptions | undefined): Required<BatchOptions> {
  checkKnownKeys(batch, BATCH_OPTION_KEYS, 'batch');
  const size = boundedInt(batch?.size, 'batch.size', 1, MAX_BATCH_SIZE, 500);
  const catchUpSize = boundedInt(
    batch?.catchUpSize,
    'batch.catchUpSize',
    1,
    MAX_CATCH_UP_BATCH,
    Math.max(DEFAULT_CATCH_UP_BATCH, size),
  );
  if (catchUpSize < size)
    throw new InvalidInputError('batch.catchUpSize', `must be at least batch.size (${size})`);
  return { size, catchUpSize, maxWaitMs: intOption(batch?.maxWaitMs, 'batch.maxWaitMs', 0, 0) };
}

function resolveRedrive(
  value: RedriveOption | undefined,
  then: 'stop' | 'dead-letter',
): RedrivePolicy | null {
  if (value === undefined) return null;
  if (then !== 'dead-letter')
    throw new InvalidInputError('onError.redrive', "applies only with then: 'dead-letter'");
  if (value === null || typeof value !== 'object')
    throw new InvalidInputError('onError.redrive', 'must be an object { after, factor?, max? }');
  checkKnownKeys(value, REDRIVE_OPTION_KEYS, 'onError.redrive');
  const { afterMs } = REDRIVE_BOUNDS;
  const after = parseDuration(value.after, 'onError.redrive.after');
  if (after < afterMs.min || after > afterMs.max)
    throw new InvalidInputError('onError.redrive.after', `must be from ${afterMs.min} ms to 30 days`);
  return validateRedrivePolicy(
    { afterMs: after, factor: value.factor ?? 2, max: value.max ?? 5 },
    'onError.redrive',
  );
}

/** The outage detector's settings, resolved. */
export interface ResolvedOutage {
  entities: number;
  windowMs: number;
  holdMs: number;
  probeDelayMs: number;
  maxProbeDelayMs: number;
}

const HOUR_MS = 3_600_000;

function durationWithin(value: unknown, field: string, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  const ms = parseDuration(value, field);
  if (ms < min || ms > max) throw new InvalidInputError(field, `must be from ${min} ms to ${max} ms`);
  return ms;
}

function resolveOutage(
  value: OutageOption | false | undefined,
  then: 'stop' | 'dead-letter',
): ResolvedOutage | null {
  // Outages are told from poison only where a poison event is dead-lettered; `stop` stops at the first anyway.
  if (value === false || then !== 'dead-letter') return null;
  if (value !== undefined && (value === null || typeof value !== 'object'))
    throw new InvalidInputError('onError.outage', 'must be an object or false');
  checkKnownKeys(value, OUTAGE_OPTION_KEYS, 'onError.outage');
  const probeDelayMs = durationWithin(value?.probeDelay, 'onError.outage.probeDelay', 10, HOUR_MS, 1000);
  return {
    entities: boundedInt(value?.entities, 'onError.outage.entities', 2, 10_000, 10),
    windowMs: durationWithin(value?.window, 'onError.outage.window', 100, HOUR_MS, 30_000),
    holdMs: durationWithin(value?.hold, 'onError.outage.hold', 10, HOUR_MS, 1000),
    probeDelayMs,
    maxProbeDelayMs: durationWithin(
      value?.maxProbeDelay,
      'onError.outage.maxProbeDelay',
      probeDelayMs,
      HOUR_MS,
      Math.max(60_000, probeDelayMs),
    ),
  };
}

/** Checks the options and fills in defaults; bad input throws `InvalidInputError` naming the field. */
export function resolveOptions<Tx, M extends EventMap>(options: ConsumerOptions<Tx, M>): ResolvedOptions<Tx> {
  if (options === null || typeof options !== 'object')
    throw new InvalidInputError('options', 'must be an object');
  checkKnownKeys(options, CONSUMER_OPTION_KEYS, '');
  checkKnownKeys(options.onError, ERROR_POLICY_KEYS, 'onError');
  // Both are read below with their own checks.
  checkKnownKeys(options.reconnect, RECONNECT_OPTION_KEYS, 'reconnect');
  checkKnownKeys(options.metrics, METRICS_OPTION_KEYS, 'metrics');
  const name = validateConsumerName(options.name, 'name');
  const given = options.source as ConsumerSource | undefined;
  if (!given || typeof given.subscribe !== 'function') {
    throw new InvalidInputError('source', 'must be an event store or a consumer source (with subscribe)');
  }
  const upcast = compileUpcasters(options.upcasters);
  const source = upcast === null ? given : upcastingSource(given, upcast);
  const target = options.target as ConsumerTarget<Tx> | undefined;
  if (!target || typeof target.transaction !== 'function') {
    throw new InvalidInputError('target', 'must be a consumer target (sqliteTarget or postgresTarget)');
  }
  // The compiler allows one of them; JavaScript callers may still give both, or neither.
  const handle = options.handle as unknown;
  const handleBatch = options.handleBatch as unknown;
  if (handle !== undefined && handleBatch !== undefined) {
    throw new InvalidInputError('handleBatch', 'cannot be given together with handle (choose one)');
  }
  if (handleBatch !== undefined) {
    if (typeof handleBatch !== 'function') throw new InvalidInputError('handleBatch', 'must be a function');
  } else if (typeof handle !== 'function') throw new InvalidInputError('handle', 'must be a function');
  const e = options.onError ?? {};
  const then = e.then ?? 'stop';
  if (then !== 'stop' && then !== 'dead-letter')
    throw new InvalidInputError('onError.then', "must be 'stop' or 'dead-letter'");
  const backoff = e.backoff ?? 'exponential';
  if (backoff !== 'exponential' && backoff !== 'none') {
    throw new InvalidInputError('onError.backoff', "must be 'exponential' or 'none'");
  }
  const gaps = options.gaps ?? 'recover';
  if (gaps !== 'recover' && gaps !== 'fail' && gaps !== 'wait')
    throw new InvalidInputError('gaps', "must be 'recover', 'fail' or 'wait'");
  const from = options.from ?? 'start';
  if (
    from !== 'start' &&
    from !== 'end' &&
    !(typeof from === 'number' && Number.isSafeInteger(from) && from >= 0)
  ) {
    throw new InvalidInputError('from', "must be 'start', 'end' or a position >= 0");
  }
  const metrics = options.metrics;
  if (metrics !== undefined && (metrics === null || typeof metrics.registry?.registerMetric !== 'function')) {
    throw new InvalidInputError('metrics.registry', 'must be a prom-client Registry');
  }
  const leaseTtlMs =
    options.leaseTtlMs === undefined
      ? undefined
      : boundedInt(options.leaseTtlMs, 'leaseTtlMs', MIN_LEASE_TTL_MS, MAX_LEASE_TTL_MS, 0);
  if (options.owner !== undefined && typeof options.owner !== 'string')
    throw new InvalidInputError('owner', 'must be a string');
  const filter = normalizeFilter(options.filter as EventFilter | undefined, 'filter');
  if (filter.partition)
    throw new InvalidInputError('filter.partition', 'is set by the runtime: use partitions');
  if (options.partitionConcurrency !== undefined && options.partitions === undefined)
    throw new InvalidInputError('partitionConcurrency', 'needs partitions');
  return {
    name,
    targetName: name,
    partitions:
      options.partitions === undefined
        ? null
        : boundedInt(options.partitions, 'partitions', 1, MAX_PARTITIONS, 1),
    partitionConcurrency:
      options.partitionConcurrency === undefined
        ? null
        : boundedInt(options.partitionConcurrency, 'partitionConcurrency', 1, MAX_PARTITIONS, 1),
    batchGate: null,
    source,
    filter,
    target,
    guards: normalizeGuards(options.guard, 'guard'),
    // The filter lets through only the map's types, so the handlers get the events they were typed for.
    handle: handleBatch === undefined ? (handle as Handler<Tx>) : null,
    handleBatch: (handleBatch as BatchHandler<Tx> | undefined) ?? null,
    onError: {
      attempts: intOption(e.attempts, 'onError.attempts', 1, 3),
      backoff,
      initialDelayMs: intOption(e.initialDelayMs, 'onError.initialDelayMs', 0, 100),
      maxDelayMs: intOption(e.maxDelayMs, 'onError.maxDelayMs', 0, 5000),
      then,
      redrive: resolveRedrive(e.redrive, then),
      outage: resolveOutage(e.outage, then),
    },
    gaps,
    gapWaitMs: boundedInt(options.gapWaitMs, 'gapWaitMs', 1, 3_600_000, 10_000),
    batch: resolveBatch(options.batch),
    standby: options.standby === true,
    from,
    leaseTtlMs,
    owner: options.owner,
    metrics,
    reconnect: {
      initialDelayMs: intOption(options.reconnect?.initialDelayMs, 'reconnect.initialDelayMs', 0, 100),
      maxDelayMs: intOption(options.reconnect?.maxDelayMs, 'reconnect.maxDelayMs', 0, 5000),
    },
    effects: resolveConsumerEffects(name, target, source, options.effects),
    ledger: resolveLedger(options.ledger, target),
    onShred: resolveOnShred(options.onShred),
  };
}

function resolveOnShred<Tx>(value: unknown): ResolvedOptions<Tx>['onShred'] {
  if (value === undefined) return null;
  if (typeof value !== 'function') throw new InvalidInputError('onShred', 'must be a function (stream, ctx)');
  return value as ResolvedOptions<Tx>['onShred'];
}

function resolveLedger<Tx>(
  ledger: LedgerOptions | undefined,
  target: ConsumerTarget<Tx>,
): ResolvedRetain | null {
  const retain = resolveLedgerOptions(ledger);
  if (retain && typeof target.pruneLedger !== 'function')
    throw new InvalidInputError('ledger', `the ${target.kind} target cannot prune its ledger`);
  return retain;
}
