import type { Client, Pool } from 'pg';
import type { AppendOptions, EventStore, ReadAllOptions, ReadStreamOptions } from '../core/eventStore.js';
import type { AppendResult, NewEvent, RecordedEvent } from '../core/event.js';
import { ClosedError, InvalidInputError } from '../core/errors.js';
import { filterKey, normalizeFilter, type EventFilter } from '../core/filter.js';
import { DEFAULT_LIMITS, type StoreLimits } from '../core/limits.js';
import { QueryCache } from '../core/queryCache.js';
import type { ConsumerAdmin, DeadLetterAdmin, SubscribeOptions, Subscription } from '../core/subscription.js';
import { validateLimit, validatePosition, validateStreamName } from '../core/validation.js';
import { AppendBatcher } from './appendBatcher.js';
import { appendEvents } from './appendEvents.js';
import { AppendNotifier } from './appendNotifier.js';
import { withReconnect, type RetryOptions } from './connectionFaults.js';
import { guardPool } from './checkout.js';
import {
  EVENT_TUPLE_COLUMNS,
  filterSql,
  isoText,
  tuplesToRecordedEvents,
  type PgEventTuple,
} from './eventRows.js';
import { loadPg } from './loadPg.js';
import { EVENT_STORE_MIGRATIONS, runPgMigrations, type PgMigration } from './migrations.js';
import { SUBSCRIPTION_MIGRATIONS } from './subscriptionSchema.js';
import { PgSubscriptionState } from './subscriptionState.js';
import { SubscriptionService } from '../subscriptions/subscriptionService.js';
import {
  scanEnd,
  scannedPage,
  type MatchCount,
  type ScannedPage,
} from '../subscriptions/subscriptionSource.js';
import { appendChannel, DEFAULT_SCHEMA, quoteSchema, validateSchemaName } from './schemaName.js';

export interface PostgresStoreOptions {
  /** A PostgreSQL URL; the store makes (and on close ends) its own pool. Give this or `pool`. */
  connectionString?: string;
  /** An existing `pg` pool; the store uses it and leaves it open on close. Give this or `connectionString`. */
  pool?: Pool;
  /** The schema holding the store's tables; created (with its migrations) on open. @default 'idem' */
  schema?: string;
  /** Input limits; unset fields keep their defaults. */
  limits?: Partial<StoreLimits>;
  /** Connections in the pool the store makes from `connectionString`. @default 10 */
  poolSize?: number;
  /** Rows fetched per query by `readAll` and `readStream`. @default 500 */
  pageSize?: number;
  /** How statements are retried after a connection fault (terminated backend, dropped socket). */
  retry?: RetryOptions;
  /** How often the head is polled while the LISTEN connection is down. @default 250 */
  pollIntervalMs?: number;
}

/**
 * The PostgreSQL event store. Positions come from a single-row allocator locked until commit, so
 * they are gap-free and in commit order: a reader after position p can never miss a later commit
 * with a lower position. Concurrent appends are grouped into one statement and one commit (one
 * round trip, one multi-row insert per append). Consumer state lives in the same schema; live
 * subscriptions wake on LISTEN/NOTIFY. See docs/postgres.md.
 */
export class PostgresEventStore implements EventStore {
  readonly limits: StoreLimits;
  /** The unquoted schema name. */
  readonly schema: string;
  private readonly s: string;
  private readonly notifier: AppendNotifier;
  private readonly retry: RetryOptions;
  private readonly pageSize: number;
  private readonly batcher: AppendBatcher;
  /** Reads are round trips: subscriptions read the next page while the current one is processed. */
  readonly readAhead = true;
  /** Page queries of `readAll` and the subscriptions, by filter. */
  private readonly pageQueries = new QueryCache<{ text: string; params: string[][] }>();
  /** Scan queries of the subscriptions (`scanPage`), by filter. */
  private readonly scanQueries = new QueryCache<{ text: string; params: string[][] }>();
  private closed = false;
  private faults = 0;

  private readonly subscriptions: SubscriptionService;
  readonly consumers: ConsumerAdmin;
  readonly deadLetters: DeadLetterAdmin;

  /** Use `openPostgresStore`, which also loads `pg` and migrates the schema. */
  constructor(
    /** The pool every statement runs on. */
    readonly pool: Pool,
    private readonly ownsPool: boolean,
    makeClient: () => Client,
    options: {
      schema: string;
      limits: StoreLimits;
      retry: RetryOptions;
      pageSize: number;
      pollIntervalMs?: number;
    },
  ) {
    this.schema = options.schema;
    this.s = quoteSchema(options.schema);
    this.limits = options.limits;
    this.retry = options.retry;
    this.pageSize = options.pageSize;
    this.batcher = new AppendBatcher({ pool, s: this.s });
    this.notifier = new AppendNotifier({
      makeClient,
      channel: appendChannel(options.schema),
      readHead: () => this.headPosition(),
      ...(options.pollIntervalMs === undefined ? {} : { pollIntervalMs: options.pollIntervalMs }),
    });
    this.subscriptions = new SubscriptionService(this, new PgSubscriptionState(pool, this.s, this.retry));
    this.consumers = this.subscriptions.consumers;
    this.deadLetters = this.subscriptions.deadLetters;
  }

  async append(stream: string, events: NewEvent[], options: AppendOptions = {}): Promise<AppendResult> {
    this.assertOpen();
    const result = await appendEvents(
      {
        pool: this.pool,
        s: this.s,
        limits: this.limits,
        retry: this.retry,
        batcher: this.batcher,
        onFault: this.countFault,
      },
      stream,
      events,
      options,
    );
    if (!result.duplicate) this.notifier.observe(result.lastPosition);
    return result;
  }

  async *readStream(stream: string, options: ReadStreamOptions = {}): AsyncGenerator<RecordedEvent> {
    validateStreamName(stream);
    let from = options.fromVersion === undefined ? 1 : validatePosition(options.fromVersion, 'fromVersion');
    let remaining = validateLimit(options.limit) ?? Infinity;
    while (remaining > 0) {
      this.assertOpen();
      const size = Math.min(this.pageSize, remaining);
      const events = await this.queryEvents(
        `SELECT ${EVENT_TUPLE_COLUMNS} FROM ${this.s}.events WHERE stream = $1 AND version >= $2 ORDER BY version LIMIT $3`,
        [stream, from, size],
      );
      for (const e of events) yield e;
      if (events.length < size) return;
      remaining -= events.length;
      from = events[events.length - 1]!.version + 1;
    }
  }

  async *readAll(options: ReadAllOptions = {}): AsyncGenerator<RecordedEvent> {
    let after = options.after === undefined ? 0 : validatePosition(options.after, 'after');
    const filter = normalizeFilter(options.filter);
    let remaining = validateLimit(options.limit) ?? Infinity;
    while (remaining > 0) {
      const size = Math.min(this.pageSize, remaining);
      const events = await this.readPage(after, filter, size);
      for (const e of events) yield e;
      if (events.length < size) return;
      remaining -= events.length;
      after = events[events.length - 1]!.position;
    }
  }

  /**
   * Internal (the subscription engine's read, and `readAll`'s pages): up to `limit` events after
   * `after` that match the normalised `filter`, in position order, in one query.
   */
  async readPage(after: number, filter: EventFilter, limit: number): Promise<RecordedEvent[]> {
    this.assertOpen();
    const q = this.pageQueries.get(filterKey(filter), () => {
      const sql = filterSql(filter, 3);
      return {
        text: `SELECT ${EVENT_TUPLE_COLUMNS} FROM ${this.s}.events WHERE position > $1 AND ${sql.where} ORDER BY position LIMIT $2`,
        params: sql.params,
      };
    });
    return this.queryEvents(q.text, [after, limit, ...q.params]);
  }

  /**
   * Internal (the subscription engine's read): up to `limit` matching events among the positions
   * after `after`, looking at no more than `maxScan` of them, and the head, in one statement. The
   * head row is the position allocator, updated in the appending transaction: the statement's
   * snapshot holds every event up to the head it sees and none beyond, so an unfilled page proves
   * there is nothing more up to there (no later commit can take a lower position).
   */
  async scanPage(after: number, filter: EventFilter, limit: number, maxScan: number): Promise<ScannedPage> {
    this.assertOpen();
    const q = this.scanQueries.get(filterKey(filter), () => {
      const sql = filterSql(filter, 4);
      return {
        // The event columns first, so each row reads as a `PgEventTuple`; the head last, also on the
        // one row of nulls that says "no event matched".
        // (The head as a one-row subquery: planned as one row, the statement stays cheap enough that
        // PostgreSQL does not compile it with JIT, which costs more than the read.)
        text: `SELECT e.*, h.position FROM (SELECT position FROM ${this.s}.head WHERE id LIMIT 1) h LEFT JOIN LATERAL (
            SELECT ${EVENT_TUPLE_COLUMNS} FROM ${this.s}.events
            WHERE position > $1 AND position <= least(h.position, $1 + $3) AND ${sql.where}
            ORDER BY position LIMIT $2) e ON true`,
        params: sql.params,
      };
    });
    const text = q.text;
    const values = [after, limit, maxScan, ...q.params];
    const r = await withReconnect(
      () => this.pool.query<(string | null)[]>({ text, values, rowMode: 'array' }),
      this.retry,
      this.countFault,
    );
    const rows = r.rows;
    const head = Number(rows[0]?.[8] ?? 0);
    const events =
      rows.length === 1 && rows[0]![0] === null
        ? []
        : tuplesToRecordedEvents(rows as unknown as PgEventTuple[]);
    return scannedPage(events, limit, scanEnd(after, head, maxScan), head);
  }

  /** Internal (lag): the events at positions in (`after`, `upTo`] that match `filter`, counted in one query. */
  async countMatching(after: number, upTo: number, filter: EventFilter): Promise<MatchCount> {
    this.assertOpen();
    const sql = filterSql(filter, 3);
    const rows = await this.query<{ count: number; oldest: string | null }>(
      `SELECT count(*)::int AS count,
        ${isoText('min(recorded_at)')} AS oldest
        FROM ${this.s}.events WHERE position > $1 AND position <= $2 AND ${sql.where}`,
      [after, upTo, ...sql.params],
    );
    return { count: rows[0]?.count ?? 0, oldest: rows[0]?.oldest ?? null };
  }

  /** Runs a read of `EVENT_TUPLE_COLUMNS` (rows as arrays: no object per row to build and drop). */
  private async queryEvents(text: string, values: unknown[]): Promise<RecordedEvent[]> {
    const r = await withReconnect(
      () => this.pool.query<PgEventTuple>({ text, values, rowMode: 'array' }),
      this.retry,
      this.countFault,
    );
    return tuplesToRecordedEvents(r.rows);
  }

  async headPosition(): Promise<number> {
    this.assertOpen();
    const rows = await this.query<{ position: string }>(`SELECT position FROM ${this.s}.head`);
    return Number(rows[0]?.position ?? 0);
  }

  async streamVersion(stream: string): Promise<number> {
    validateStreamName(stream);
    this.assertOpen();
    const rows = await this.query<{ v: number }>(
      `SELECT coalesce(max(version), 0)::int AS v FROM ${this.s}.events WHERE stream = $1`,
      [stream],
    );
    return rows[0]?.v ?? 0;
  }

  /** Opens a durable subscription; its cursor, lease and dead letters live in the database. */
  subscribe(consumer: string, options?: SubscribeOptions): Promise<Subscription> {
    this.assertOpen();
    return this.subscriptions.subscribe(consumer, options);
  }

  /**
   * Calls `listener(head)` when the head moves: on this process's commits and, through LISTEN/NOTIFY,
   * on every other process's commits (polling while the LISTEN connection is down). Returns an unsubscribe.
   */
  onAppend(listener: (head: number) => void): () => void {
    return this.notifier.add(listener);
  }

  /** True while the dedicated LISTEN connection is up (after the first `onAppend` listener). */
  get listening(): boolean {
    return this.notifier.isListening;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.subscriptions.close();
    await this.notifier.close();
    if (this.ownsPool) await this.pool.end();
  }

  /** Runs one statement on the pool, retried on a fresh connection after a connection fault. */
  async query<R extends object>(sql: string, params: unknown[] = []): Promise<R[]> {
    const r = await withReconnect(() => this.pool.query<R>(sql, params), this.retry, this.countFault);
    return r.rows;
  }

  /** How many connection faults appends and reads of this store recovered from (retried). */
  get connectionFaults(): number {
    return this.faults;
  }

  private readonly countFault = (): void => {
    this.faults++;
  };

  private assertOpen(): void {
    if (this.closed) throw new ClosedError('postgres store');
  }
}

/** Every schema step of the store: events (1), consumer state (2). */
export const STORE_MIGRATIONS: readonly PgMigration[] = [
  ...EVENT_STORE_MIGRATIONS,
  ...SUBSCRIPTION_MIGRATIONS,
];

/**
 * Opens the PostgreSQL event store: loads `pg`, connects, and brings the schema up to date (safe when
 * several processes open the same schema at once).
 */
export async function openPostgresStore(options: PostgresStoreOptions): Promise<PostgresEventStore> {
  if (options === null || typeof options !== 'object')
    throw new InvalidInputError('options', 'must be an object');
  const { connectionString, pool: givenPool } = options;
  if ((connectionString === undefined) === (givenPool === undefined)) {
    throw new InvalidInputError('connectionString', 'give exactly one of connectionString or pool');
  }
  if (
    connectionString !== undefined &&
    (typeof connectionString !== 'string' || connectionString.length === 0)
  ) {
    throw new InvalidInputError('connectionString', 'must be a non-empty string');
  }
  const schema = validateSchemaName(options.schema ?? DEFAULT_SCHEMA);
  const poolSize = options.poolSize ?? 10;
  if (!Number.isSafeInteger(poolSize) || poolSize < 1)
    throw new InvalidInputError('poolSize', 'must be an integer >= 1');
  const pageSize = options.pageSize ?? 500;
  if (!Number.isSafeInteger(pageSize) || pageSize < 1)
    throw new InvalidInputError('pageSize', 'must be an integer >= 1');
  const pg = await loadPg();
  const pool = givenPool ?? new pg.Pool({ connectionString, max: poolSize });
  guardPool(pool);
  const clientConfig = givenPool ? givenPool.options : { connectionString };
  const store = new PostgresEventStore(pool, givenPool === undefined, () => new pg.Client(clientConfig), {
    schema,
    limits: { ...DEFAULT_LIMITS, ...options.limits },
    retry: options.retry ?? {},
    pageSize,
    ...(options.pollIntervalMs === undefined ? {} : { pollIntervalMs: options.pollIntervalMs }),
  });
  try {
    await withReconnect(() => runPgMigrations({ pool, schema }, STORE_MIGRATIONS), options.retry);
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}
