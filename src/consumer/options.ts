import type { Registry } from 'prom-client';
import type { ConsumerTarget } from '../core/consumerTarget.js';
import { InvalidInputError } from '../core/errors.js';
import type { RecordedEvent } from '../core/event.js';
import type { EventStore } from '../core/eventStore.js';
import { normalizeFilter, type EventFilter } from '../core/filter.js';
import type { StartFrom } from '../core/subscription.js';
import { compileUpcasters, type Upcasters } from '../core/upcasters.js';
import { validateConsumerName } from '../core/validation.js';
import { normalizeGuards, type Guard, type GuardSet } from './guards.js';
import { upcastingSource } from './upcastingSource.js';
import {
  resolveConsumerEffects,
  type ConsumerEffects,
  type ConsumerEffectsOptions,
} from '../effects/consumerEffects.js';
import type { EffectCallOptions, EffectWrite } from '../core/effectTypes.js';

/** What a handler gets besides the event. */
export interface HandlerContext<Tx> {
  /** The target's open transaction: a better-sqlite3 `Database` (SQLite) or a `pg` client inside BEGIN (PostgreSQL). */
  readonly tx: Tx;
  /** The consumer's name. */
  readonly consumer: string;
  /** 1 on the first try of this event, 2 on the first retry, ... */
  readonly attempt: number;
  /** True when the event is a dead letter delivered again by `deadLetters.retry`. */
  readonly redelivery: boolean;
  /** True when the event was read from the store to fill a version gap (entity-version guard). */
  readonly recovered: boolean;
  /**
   * Adds `amount` (default 1) to a counter in the target unless `member` (e.g. the event id) was counted
   * already: an additive metric that cannot double, even across consumer versions. Returns whether it counted.
   */
  addOnce(counter: string, member: string, amount?: number): Promise<boolean>;
  /**
   * Records an external effect in the target's outbox, in this transaction, keyed by (scope, key) with
   * `key` defaulting to `${event.id}:${kind}`: a redelivered event writes nothing new. A dispatcher
   * calls the effect's handler after the commit. See docs/effects-and-replay.md.
   */
  effect(kind: string, payload: unknown, options?: EffectCallOptions): Promise<EffectWrite>;
  /** The consumer's version from its name (`billing_v3` -> 3), or null for an unversioned name. */
  readonly version: number | null;
  /** What a versioned projection appends to its table names: `_v3` for `billing_v3`, '' without a version. */
  readonly tableSuffix: string;
}

export type Handler<Tx> = (event: RecordedEvent, ctx: HandlerContext<Tx>) => void | Promise<void>;

/** What a batch handler gets besides the events. */
export interface BatchHandlerContext<Tx> {
  /** The target's open transaction, as for `handle`. */
  readonly tx: Tx;
  /** The consumer's name. */
  readonly consumer: string;
  /** 1 while events are handled together; 2, 3... when one event is retried alone after it failed. */
  readonly attempt: number;
  /** True when the events are dead letters delivered again by `deadLetters.retry`. */
  readonly redelivery: boolean;
  /** Positions of the events that were read from the store to fill a version gap (entity-version guard). */
  readonly recovered: ReadonlySet<number>;
  /** As `HandlerContext.addOnce`. */
  addOnce(counter: string, member: string, amount?: number): Promise<boolean>;
  /** As `HandlerContext.effect`, for one of the events (its id is the default key). */
  effect(
    event: RecordedEvent,
    kind: string,
    payload: unknown,
    options?: EffectCallOptions,
  ): Promise<EffectWrite>;
  /** The consumer's version from its name (`billing_v3` -> 3), or null for an unversioned name. */
  readonly version: number | null;
  /** What a versioned projection appends to its table names: `_v3` for `billing_v3`, '' without a version. */
  readonly tableSuffix: string;
}

/**
 * A handler of several events at once, in position order, after the guards removed duplicates: for
 * set-shaped writes (one statement per batch). If it throws, the runtime isolates the failing event
 * (see docs/consumers.md, "Batch handlers") and `onError` applies to that event alone.
 */
export type BatchHandler<Tx> = (
  events: RecordedEvent[],
  ctx: BatchHandlerContext<Tx>,
) => void | Promise<void>;

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
}

export interface BatchOptions {
  /** Most events in one target transaction once live, and the size of each page read from the source. @default 500 */
  size?: number;
  /**
   * Most events in one target transaction while catching up (from the start of a subscription until
   * the source says it caught up): the pages read are merged, so a long catch-up commits, acks and
   * writes each B-tree page of the target less often. Set it to `size` to commit page by page.
   * @default the larger of 2000 and `size`
   */
  catchUpSize?: number;
  /** How long to wait for more events to fill a batch once one has arrived, in ms. @default 0 (process what is delivered) */
  maxWaitMs?: number;
}

export interface ConsumerMetricsOptions {
  /** A prom-client registry to register the consumer metrics in (shared metrics, labelled by `consumer`). */
  registry: Registry;
  /** Metric name prefix. @default 'idem_consumer_' */
  prefix?: string;
}

export interface ConsumerOptions<Tx> {
  /** The consumer's identity: versioned, e.g. `billing_v2`. */
  name: string;
  /** Any event store: embedded, PostgreSQL, remote. Uses `subscribe`, `readStream` (gap recovery) and `headPosition`. */
  source: EventStore;
  /** Which events the consumer wants; part of its identity. @default {} (everything) */
  filter?: EventFilter;
  /** Where output, ledger, entity versions and checkpoint commit together. */
  target: ConsumerTarget<Tx>;
  /** How duplicates are recognised; an array combines guards. @default 'event-id' */
  guard?: Guard | Guard[];
  /** Handles one event. Give either `handle` or `handleBatch`. */
  handle?: Handler<Tx>;
  /** Handles the new events of a batch in one call. Give either `handle` or `handleBatch`. */
  handleBatch?: BatchHandler<Tx>;
  onError?: ErrorPolicy;
  /** Version gaps (entity-version guard): read the missing versions and apply them, or fail. @default 'recover' */
  gaps?: 'recover' | 'fail';
  batch?: BatchOptions;
  /** Wait as a standby while another process owns the consumer, instead of rejecting `start()`. @default false */
  standby?: boolean;
  /** Where a new consumer starts. @default 'start' */
  from?: StartFrom;
  /** Lease time to live of the subscription, in ms. @default the store's (10000) */
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
}

export interface ResolvedOptions<Tx> {
  name: string;
  source: EventStore;
  filter: EventFilter;
  target: ConsumerTarget<Tx>;
  guards: GuardSet;
  /** Exactly one of `handle` and `handleBatch` is set. */
  handle: Handler<Tx> | null;
  handleBatch: BatchHandler<Tx> | null;
  onError: Required<ErrorPolicy>;
  gaps: 'recover' | 'fail';
  batch: Required<BatchOptions>;
  standby: boolean;
  from: StartFrom;
  leaseTtlMs: number | undefined;
  owner: string | undefined;
  metrics: ConsumerMetricsOptions | undefined;
  reconnect: { initialDelayMs: number; maxDelayMs: number };
  /** null when the target has no outbox (and no `effects` option was given). */
  effects: ConsumerEffects<Tx> | null;
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

function resolveBatch(batch: BatchOptions | undefined): Required<BatchOptions> {
  if (batch !== undefined && (batch === null || typeof batch !== 'object'))
    throw new InvalidInputError('batch', 'must be an object');
  const size = intOption(batch?.size, 'batch.size', 1, 500);
  const catchUpSize = intOption(
    batch?.catchUpSize,
    'batch.catchUpSize',
    1,
    Math.max(DEFAULT_CATCH_UP_BATCH, size),
  );
  if (catchUpSize < size)
    throw new InvalidInputError('batch.catchUpSize', `must be at least batch.size (${size})`);
  return { size, catchUpSize, maxWaitMs: intOption(batch?.maxWaitMs, 'batch.maxWaitMs', 0, 0) };
}

/** Checks the options and fills in defaults; bad input throws `InvalidInputError` naming the field. */
export function resolveOptions<Tx>(options: ConsumerOptions<Tx>): ResolvedOptions<Tx> {
  if (options === null || typeof options !== 'object')
    throw new InvalidInputError('options', 'must be an object');
  const name = validateConsumerName(options.name, 'name');
  const given = options.source as EventStore | undefined;
  if (!given || typeof given.subscribe !== 'function') {
    throw new InvalidInputError('source', 'must be an event store (with subscribe)');
  }
  const upcast = compileUpcasters(options.upcasters);
  const source = upcast === null ? given : upcastingSource(given, upcast);
  const target = options.target as ConsumerTarget<Tx> | undefined;
  if (!target || typeof target.transaction !== 'function') {
    throw new InvalidInputError('target', 'must be a consumer target (sqliteTarget or postgresTarget)');
  }
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
  if (gaps !== 'recover' && gaps !== 'fail')
    throw new InvalidInputError('gaps', "must be 'recover' or 'fail'");
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
    options.leaseTtlMs === undefined ? undefined : intOption(options.leaseTtlMs, 'leaseTtlMs', 100, 0);
  if (options.owner !== undefined && typeof options.owner !== 'string')
    throw new InvalidInputError('owner', 'must be a string');
  return {
    name,
    source,
    filter: normalizeFilter(options.filter, 'filter'),
    target,
    guards: normalizeGuards(options.guard, 'guard'),
    handle: options.handleBatch === undefined ? (options.handle ?? null) : null,
    handleBatch: options.handleBatch ?? null,
    onError: {
      attempts: intOption(e.attempts, 'onError.attempts', 1, 3),
      backoff,
      initialDelayMs: intOption(e.initialDelayMs, 'onError.initialDelayMs', 0, 100),
      maxDelayMs: intOption(e.maxDelayMs, 'onError.maxDelayMs', 0, 5000),
      then,
    },
    gaps,
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
  };
}
