import type Database from 'better-sqlite3';
import { AppendListeners } from '../core/appendListeners.js';
import type { AppendOptions, EventStore, ReadAllOptions, ReadStreamOptions } from '../core/eventStore.js';
import type { AppendResult, NewEvent, RecordedEvent } from '../core/event.js';
import { ClosedError, InvalidInputError } from '../core/errors.js';
import { parseExpectedVersion } from '../core/expectedVersion.js';
import { filterKey, normalizeFilter, type EventFilter } from '../core/filter.js';
import { DEFAULT_LIMITS, type StoreLimits } from '../core/limits.js';
import { QueryCache } from '../core/queryCache.js';
import type { ConsumerAdmin, DeadLetterAdmin, SubscribeOptions, Subscription } from '../core/subscription.js';
import { prepareAppend, validateLimit, validatePosition, validateStreamName } from '../core/validation.js';
import { SubscriptionService } from '../subscriptions/subscriptionService.js';
import {
  scanEnd,
  scannedPage,
  type MatchCount,
  type ScannedPage,
} from '../subscriptions/subscriptionSource.js';
import { SqliteSubscriptionState } from './subscriptionState.js';
import { AppendBatcher } from './appendBatcher.js';
import { EVENT_COLUMNS, filterSql, tuplesToRecordedEvents, type EventTuple } from './eventRows.js';
import { runMigrations, STORE_MIGRATIONS } from './migrations.js';
import { openDatabase, retryWhileBusy } from './connection.js';

/**
 * - `'full'` (default): `synchronous=FULL`; an acknowledged append survives a process kill and an OS crash.
 * - `'normal'`: `synchronous=NORMAL` in WAL mode; survives a process kill, but an OS crash or power
 *   loss may lose the last appends acknowledged before it (the file stays consistent). Faster.
 */
export type Durability = 'full' | 'normal';

export interface SqliteStoreOptions {
  /** The database file; its directory is created. `:memory:` gives a private in-memory database. */
  path: string;
  /** @default 'full' */
  durability?: Durability;
  /** Input limits; unset fields keep their defaults. */
  limits?: Partial<StoreLimits>;
  /** How long a write waits for another process's write lock before failing. @default 10000 */
  busyTimeoutMs?: number;
  /** Events fetched per page by `readAll`/`readStream`. @default 500 */
  readPageSize?: number;
}

/** A statement prepared for one filter, with the filter's parameters. */
interface PreparedFilterQuery {
  stmt: Database.Statement;
  params: (string | number)[];
}

/**
 * The embedded event store: one SQLite file in WAL mode, shared safely by several processes.
 * Appends that arrive together are committed in one transaction (group commit), each with its own
 * expected-version check and result.
 */
export class SqliteEventStore implements EventStore {
  readonly limits: StoreLimits;
  readonly path: string;
  readonly durability: Durability;
  /** The better-sqlite3 handle (internal: used by the subscription state and the tools). */
  readonly db: Database.Database;
  private readonly batcher: AppendBatcher;
  private readonly listeners = new AppendListeners();
  private readonly pageSize: number;
  /** Prepared page queries of `readAll` and the subscriptions, by filter (raw mode: rows as arrays). */
  private readonly pageQueries = new QueryCache<PreparedFilterQuery>();
  /** Prepared lag counts (`countMatching`), by filter. */
  private readonly countQueries = new QueryCache<PreparedFilterQuery>();
  private streamPageStmt: Database.Statement | undefined;
  private headStmt: Database.Statement | undefined;
  private closed = false;

  private readonly subscriptions: SubscriptionService;
  readonly consumers: ConsumerAdmin;
  readonly deadLetters: DeadLetterAdmin;

  constructor(options: SqliteStoreOptions) {
    if (typeof options.path !== 'string' || options.path.length === 0) {
      throw new InvalidInputError('path', 'must be a non-empty file path');
    }
    const durability = options.durability ?? 'full';
    if (durability !== 'full' && durability !== 'normal') {
      throw new InvalidInputError('durability', "must be 'full' or 'normal'");
    }
    this.path = options.path;
    this.durability = durability;
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.pageSize = validateLimit(options.readPageSize, 'readPageSize') ?? 500;
    const busyTimeoutMs = options.busyTimeoutMs ?? 10_000;
    this.db = openDatabase(options.path, { durability, busyTimeoutMs });
    try {
      retryWhileBusy(() => runMigrations(this.db, STORE_MIGRATIONS), busyTimeoutMs);
    } catch (err) {
      this.db.close();
      throw err;
    }
    this.batcher = new AppendBatcher(this.db, (head) => this.listeners.emit(head));
    const state = new SqliteSubscriptionState(this.db, Date.now, (fn) => this.batcher.enqueueWrite(fn));
    this.subscriptions = new SubscriptionService(this, state);
    this.consumers = this.subscriptions.consumers;
    this.deadLetters = this.subscriptions.deadLetters;
  }

  // Not `async`: returning the batcher's promise itself saves a promise and two ticks per append.
  append(stream: string, events: NewEvent[], options: AppendOptions = {}): Promise<AppendResult> {
    try {
      this.assertOpen();
      const prepared = prepareAppend(stream, events, this.limits);
      const expected = parseExpectedVersion(options.expectedVersion, 'expectedVersion');
      return this.batcher.enqueue(stream, prepared, expected);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  async *readStream(stream: string, options: ReadStreamOptions = {}): AsyncGenerator<RecordedEvent> {
    validateStreamName(stream);
    let from = options.fromVersion === undefined ? 1 : validatePosition(options.fromVersion, 'fromVersion');
    let remaining = validateLimit(options.limit) ?? Infinity;
    this.assertOpen();
    const stmt = (this.streamPageStmt ??= this.db
      .prepare(
        `SELECT ${EVENT_COLUMNS} FROM idem_events WHERE stream = ? AND version >= ? ORDER BY version LIMIT ?`,
      )
      .raw(true));
    while (remaining > 0) {
      this.assertOpen();
      const size = Math.min(this.pageSize, remaining);
      const events = tuplesToRecordedEvents(stmt.all(stream, from, size) as EventTuple[]);
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
      this.assertOpen();
      const size = Math.min(this.pageSize, remaining);
      const events = this.page(after, Number.MAX_SAFE_INTEGER, filter, size);
      for (const e of events) yield e;
      if (events.length < size) return;
      remaining -= events.length;
      after = events[events.length - 1]!.position;
    }
  }

  /**
   * Internal (the subscription engine's read): up to `limit` events after `after` that match the
   * normalised `filter`, in position order, as one array: one query, and no promise per event.
   */
  readPage(after: number, filter: EventFilter, limit: number): Promise<RecordedEvent[]> {
    try {
      this.assertOpen();
      return Promise.resolve(this.page(after, Number.MAX_SAFE_INTEGER, filter, limit));
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /**
   * Internal (the subscription engine's read): up to `limit` matching events among the positions
   * after `after`, looking at no more than `maxScan` of them, with the head read just before (every
   * position up to it is committed, so an unfilled page proves there is nothing more up to there).
   */
  scanPage(after: number, filter: EventFilter, limit: number, maxScan: number): Promise<ScannedPage> {
    try {
      this.assertOpen();
      const head = this.head();
      const upTo = scanEnd(after, head, maxScan);
      const events = this.page(after, upTo, filter, limit);
      return Promise.resolve(scannedPage(events, limit, upTo, head));
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** Internal (lag): the events at positions in (`after`, `upTo`] that match `filter`, counted in one query. */
  countMatching(after: number, upTo: number, filter: EventFilter): Promise<MatchCount> {
    try {
      this.assertOpen();
      const q = this.countQueries.get(filterKey(filter), () => {
        const sql = filterSql(filter);
        const stmt = this.db
          .prepare(
            `SELECT count(*), min(recorded_at) FROM idem_events WHERE position > ? AND position <= ? AND ${sql.where}`,
          )
          .raw(true);
        return { stmt, params: sql.params };
      });
      const [count, oldest] = q.stmt.get(after, upTo, ...q.params) as [number, string | null];
      return Promise.resolve({ count, oldest });
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** Up to `limit` events at positions in (`after`, `upTo`] that match the normalised `filter`. */
  private page(after: number, upTo: number, filter: EventFilter, limit: number): RecordedEvent[] {
    const q = this.pageQueries.get(filterKey(filter), () => {
      const sql = filterSql(filter);
      const stmt = this.db
        .prepare(
          `SELECT ${EVENT_COLUMNS} FROM idem_events WHERE position > ? AND position <= ? AND ${sql.where} ORDER BY position LIMIT ?`,
        )
        .raw(true);
      return { stmt, params: sql.params };
    });
    return tuplesToRecordedEvents(q.stmt.all(after, upTo, ...q.params, limit) as EventTuple[]);
  }

  async headPosition(): Promise<number> {
    this.assertOpen();
    return this.head();
  }

  /** The head position, synchronously (internal). */
  head(): number {
    this.headStmt ??= this.db.prepare('SELECT coalesce(max(position), 0) AS h FROM idem_events').pluck();
    return this.headStmt.get() as number;
  }

  async streamVersion(stream: string): Promise<number> {
    this.assertOpen();
    validateStreamName(stream);
    const row = this.db
      .prepare('SELECT coalesce(max(version), 0) AS v FROM idem_events WHERE stream = ?')
      .get(stream);
    return (row as { v: number }).v;
  }

  subscribe(consumer: string, options?: SubscribeOptions): Promise<Subscription> {
    if (this.closed) return Promise.reject(new ClosedError('SQLite store'));
    return this.subscriptions.subscribe(consumer, options);
  }

  /** Calls `listener(head)` after every append committed through this store object. Returns an unsubscribe. */
  onAppend(listener: (head: number) => void): () => void {
    return this.listeners.add(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.subscriptions.close();
    await this.batcher.drain();
    this.listeners.clear();
    this.db.close();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private assertOpen(): void {
    if (this.closed) throw new ClosedError('SQLite store');
  }
}

/** Opens (creating and migrating when needed) an embedded store file. */
export async function openSqliteStore(options: SqliteStoreOptions): Promise<SqliteEventStore> {
  return new SqliteEventStore(options);
}
