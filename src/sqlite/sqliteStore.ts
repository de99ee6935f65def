import { existsSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { AppendListeners } from '../core/appendListeners.js';
import {
  type AppendOptions,
  type EventStore,
  type ReadAllOptions,
  type ReadStreamOptions,
  type ShredRecord,
  type ShredResult,
} from '../core/eventStore.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';
import type { AppendResult, NewEvent, RecordedEvent } from '../core/event.js';
import { ClosedError, InvalidInputError, StoreNotFoundError } from '../core/errors.js';
import { appendExpectation } from '../core/expectedVersion.js';
import { filterKey, streamProbes, type EventFilter } from '../core/filter.js';
import { CHECKS_APPENDS_FIRST, resolveStoreLimits, type StoreLimits } from '../core/limits.js';
import { migrationStatus, type MigrationStatus } from '../core/migrationStatus.js';
import { readAllTable, readStreamTable } from '../core/readPages.js';
import { compileUpcasters, type UpcastEvents, type Upcasters } from '../core/upcasters.js';
import {
  resolveEncryptOptions,
  validateShredsRange,
  validateSubject,
  type EncryptOptions,
  type EventCipher,
} from '../core/encryption.js';
import { QueryCache } from '../core/queryCache.js';
import type { ConsumerAdmin, DeadLetterAdmin, SubscribeOptions, Subscription } from '../core/subscription.js';
import { countWithinBytes } from '../core/pageBytes.js';
import { prepareAppend, validateLimit, validateStreamName } from '../core/validation.js';
import { SubscriptionService } from '../subscriptions/subscriptionService.js';
import {
  scanEnd,
  scannedPage,
  type KeyGroup,
  type KeyPage,
  type MatchCount,
  type ScannedPage,
  type StreamsAnswer,
} from '../subscriptions/subscriptionSource.js';
import { SqliteSubscriptionState } from './subscriptionState.js';
import { AppendBatcher } from './appendBatcher.js';
import { SqliteShredLog, SqliteSubjectKeys } from './subjectKeys.js';
import {
  EVENT_COLUMNS,
  ensurePartitionIndex,
  filterSql,
  tuplesToRecordedEvents,
  type EventTuple,
} from './eventRows.js';
import { runMigrations, schemaVersion, STORE_MIGRATIONS } from './migrations.js';
import { openDatabase, retryWhileBusy } from './connection.js';
import { eventCount, traceAppend } from '../core/tracing.js';

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
  /**
   * Create the file (and its directory) and the store's tables when they do not exist. With `false`,
   * a path holding no idem store fails with `not_found` ("no store at PATH"), and nothing is
   * created or changed: for tools that only read. @default true
   */
  create?: boolean;
  /** Applied to every event read (streams, `readAll`, subscriptions); see `Upcasters`. */
  upcasters?: Upcasters;
  /**
   * Crypto-shredding: the data of events whose `subject(event)` is not null is stored encrypted
   * (AES-256-GCM, one key per subject, in the store's own key table unless `keys` is given) and
   * decrypted on every read; `store.shred(subject)` deletes the key. See docs/data-lifecycle.md.
   */
  encrypt?: EncryptOptions;
}

const SQLITE_STORE_OPTION_KEYS = {
  path: true,
  durability: true,
  limits: true,
  busyTimeoutMs: true,
  readPageSize: true,
  create: true,
  upcasters: true,
  encrypt: true,
} as const satisfies KnownKeys<SqliteStoreOptions>;

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
  private keysStmt: Database.Statement | undefined;
  /** The first stream at or after a text (`streamsMayMatch`). */
  private firstStreamStmt: Database.Statement | undefined;
  private groupStmt: Database.Statement | undefined;
  private closed = false;
  private readonly busyTimeoutMs: number;
  /** Set only when upcasters are given, so that a read without them does nothing more per event. */
  readonly upcast: UpcastEvents | null;
  /** Set only with `encrypt`. */
  private readonly cipher: EventCipher | null;
  private shredLog: SqliteShredLog | null = null;

  private readonly subscriptions: SubscriptionService;
  readonly consumers: ConsumerAdmin;
  readonly deadLetters: DeadLetterAdmin;

  /** Internal: appends are checked against `limits` before anything else (see `CHECKS_APPENDS_FIRST`). */
  get [CHECKS_APPENDS_FIRST](): StoreLimits | null {
    return this.cipher === null ? this.limits : null;
  }

  constructor(options: SqliteStoreOptions) {
    if (options === undefined) throw new InvalidInputError('options', 'must be an object');
    checkKnownKeys(options, SQLITE_STORE_OPTION_KEYS, '');
    if (typeof options.path !== 'string' || options.path.length === 0) {
      throw new InvalidInputError('path', 'must be a non-empty file path');
    }
    const durability = options.durability ?? 'full';
    if (durability !== 'full' && durability !== 'normal') {
      throw new InvalidInputError('durability', "must be 'full' or 'normal'");
    }
    this.path = options.path;
    this.durability = durability;
    const create = options.create ?? true;
    if (typeof create !== 'boolean') throw new InvalidInputError('create', 'must be a boolean');
    this.limits = resolveStoreLimits(options.limits);
    this.pageSize = validateLimit(options.readPageSize, 'readPageSize') ?? 500;
    this.upcast = compileUpcasters(options.upcasters);
    const busyTimeoutMs = options.busyTimeoutMs ?? 10_000;
    this.busyTimeoutMs = busyTimeoutMs;
    const path = options.path;
    if (!create && (path === ':memory:' || !existsSync(path))) throw noStoreAt(path);
    this.db = openDatabase(path, {
      durability,
      busyTimeoutMs,
      ...(create ? {} : { existing: (db: Database.Database) => requireStoreTables(db, path) }),
    });
    try {
      retryWhileBusy(() => runMigrations(this.db, STORE_MIGRATIONS), busyTimeoutMs);
    } catch (err) {
      this.db.close();
      throw err;
    }
    this.batcher = new AppendBatcher(this.db, (head) => this.listeners.emit(head));
    this.cipher = resolveEncryptOptions(
      options.encrypt,
      () => new SqliteSubjectKeys(this.db, (fn) => this.batcher.enqueueWrite(fn)),
    );
    const state = new SqliteSubscriptionState(this.db, Date.now, (fn) => this.batcher.enqueueWrite(fn));
    this.subscriptions = new SubscriptionService(this, state);
    this.consumers = this.subscriptions.consumers;
    this.deadLetters = this.subscriptions.deadLetters;
  }

  // Not `async`: returning the batcher's promise itself saves a promise and two ticks per append.
  append(stream: string, events: NewEvent[], options: AppendOptions = {}): Promise<AppendResult> {
    return traceAppend(stream, eventCount(events), () => {
      if (this.cipher) {
        const plain = this.cipher;
        return Promise.resolve()
          .then(() => {
            this.assertOpen();
            validateStreamName(stream);
            return plain.seal(stream, events);
          })
          .then((sealed) => this.appendStored(stream, sealed, options));
      }
      return this.appendStored(stream, events, options);
    });
  }

  /** Appends events whose data is as it will be stored (sealed already, with `encrypt`). */
  private appendStored(stream: string, events: NewEvent[], options: AppendOptions): Promise<AppendResult> {
    try {
      this.assertOpen();
      const prepared = prepareAppend(stream, events, this.limits);
      const expected = appendExpectation(options);
      return this.batcher.enqueue(stream, prepared, expected);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  readStream(stream: string, options: ReadStreamOptions = {}): AsyncGenerator<RecordedEvent, undefined> {
    return readStreamTable(stream, options, this.pageSize, (version, size) => {
      this.assertOpen();
      const stmt = (this.streamPageStmt ??= this.db
        .prepare(
          `SELECT ${EVENT_COLUMNS} FROM idem_events WHERE stream = ? AND version >= ? ORDER BY version LIMIT ?`,
        )
        .raw(true));
      return this.readable(this.toEvents(stmt.all(stream, version, size) as EventTuple[]));
    });
  }

  readAll(options: ReadAllOptions = {}): AsyncGenerator<RecordedEvent, undefined> {
    return readAllTable(options, this.pageSize, (after, filter, size) => {
      this.assertOpen();
      return this.readable(this.page(after, Number.MAX_SAFE_INTEGER, filter, size).events);
    });
  }

  /**
   * Internal (the subscription engine's read): up to `limit` events after `after` that match the
   * normalised `filter`, in position order, as one array: one query, and no promise per event.
   */
  readPage(after: number, filter: EventFilter, limit: number, maxBytes?: number): Promise<RecordedEvent[]> {
    try {
      this.assertOpen();
      return this.readable(this.page(after, Number.MAX_SAFE_INTEGER, filter, limit, maxBytes).events);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /**
   * Internal (the subscription engine's read): up to `limit` matching events among the positions
   * after `after`, looking at no more than `maxScan` of them, with the head read just before (every
   * position up to it is committed, so an unfilled page proves there is nothing more up to there).
   * With `maxBytes` the page ends before the event that would take it past that many bytes.
   */
  scanPage(
    after: number,
    filter: EventFilter,
    limit: number,
    maxScan: number,
    maxBytes?: number,
  ): Promise<ScannedPage> {
    try {
      this.assertOpen();
      const head = this.head();
      const upTo = scanEnd(after, head, maxScan);
      const { events, cut } = this.page(after, upTo, filter, limit, maxBytes);
      if (this.cipher)
        return this.readable(events).then((opened) => scannedPage(opened, limit, upTo, head, cut));
      return Promise.resolve(scannedPage(events, limit, upTo, head, cut));
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** Internal (lag): the events at positions in (`after`, `upTo`] that match `filter`, counted in one query. */
  countMatching(after: number, upTo: number, filter: EventFilter): Promise<MatchCount> {
    try {
      this.assertOpen();
      const q = this.countQueries.get(filterKey(filter), () => {
        this.partitionIndex(filter);
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

  /**
   * Internal (shared tail reads and lag): each event's position, stream, type and stream hash among
   * the positions after `after`, looking at no more than `maxScan`, with the head read just before
   * (as `scanPage`).
   */
  scanKeys(after: number, maxScan: number): Promise<KeyPage> {
    try {
      this.assertOpen();
      const head = this.head();
      const through = scanEnd(after, head, maxScan);
      // Each column as one JSON array, parsed here: no row object per key (see `EventKeys`).
      this.keysStmt ??= this.db
        .prepare(
          `SELECT json_group_array(position ORDER BY position), json_group_array(stream ORDER BY position),
                  json_group_array(type ORDER BY position), json_group_array(stream_hash ORDER BY position)
             FROM idem_events WHERE position > ? AND position <= ?`,
        )
        .raw(true);
      const [positions, streams, types, hashes] = (this.keysStmt.get(after, through) as string[]).map(
        (json) => JSON.parse(json) as unknown[],
      ) as [number[], string[], string[], number[]];
      return Promise.resolve({ positions, streams, types, hashes, through, head });
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /**
   * Internal (shared tail): whether a stored stream is in one of the filter's categories or starts
   * with one of its prefixes, and the head when none is. The `(stream, version)` index orders streams
   * by their UTF-8 bytes, so the streams starting with a prefix come right at or after it: the first
   * stream at or after the prefix tells, one probe per prefix (a category `c` is the stream `c` or
   * the prefix `c-`).
   */
  streamsMayMatch(filter: EventFilter): Promise<StreamsAnswer> {
    try {
      this.assertOpen();
      // The head before the probes: a matching event another connection appends in between is then
      // either seen by a probe or above the head, never passed over.
      const head = this.head();
      const probes = streamProbes(filter);
      if (probes === null) return Promise.resolve({ may: true });
      this.firstStreamStmt ??= this.db
        .prepare('SELECT stream FROM idem_events WHERE stream >= ? ORDER BY stream LIMIT 1')
        .pluck();
      const stmt = this.firstStreamStmt;
      const may = probes.some((p) => p.wants(stmt.get(p.text) as string | undefined));
      return Promise.resolve(may ? { may } : { may, head });
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** Internal (lag): the distinct stream and type pairs at positions in (`after`, `upTo`], with first and last positions. */
  groupKeys(after: number, upTo: number): Promise<KeyGroup[]> {
    try {
      this.assertOpen();
      this.groupStmt ??= this.db
        .prepare(
          'SELECT stream, type, stream_hash, min(position), max(position) FROM idem_events WHERE position > ? AND position <= ? GROUP BY stream, type, stream_hash',
        )
        .raw(true);
      return Promise.resolve(this.groupStmt.all(after, upTo) as KeyGroup[]);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /**
   * Up to `limit` events at positions in (`after`, `upTo`] that match the normalised `filter`; with
   * `maxBytes`, cut before the event that would take the page's data and metadata past it (`cut`).
   */
  private page(
    after: number,
    upTo: number,
    filter: EventFilter,
    limit: number,
    maxBytes?: number,
  ): { events: RecordedEvent[]; cut: boolean } {
    const q = this.pageQueries.get(filterKey(filter), () => {
      this.partitionIndex(filter);
      const sql = filterSql(filter);
      const stmt = this.db
        .prepare(
          `SELECT ${EVENT_COLUMNS} FROM idem_events WHERE position > ? AND position <= ? AND ${sql.where} ORDER BY position LIMIT ?`,
        )
        .raw(true);
      return { stmt, params: sql.params };
    });
    const rows = q.stmt.all(after, upTo, ...q.params, limit) as EventTuple[];
    if (maxBytes === undefined) return { events: this.toEvents(rows), cut: false };
    // UTF-8 takes at most 3 bytes per UTF-16 unit: a page whose text is under a third of the bound
    // (the usual page) is within it without measuring each event.
    let units = 0;
    for (const row of rows) units += row[5].length + row[6].length;
    if (units * 3 <= maxBytes) return { events: this.toEvents(rows), cut: false };
    // Measured on the stored JSON text, before parsing: the rows past the bound are never parsed.
    const keep = countWithinBytes(
      rows.length,
      (i) => Buffer.byteLength(rows[i]![5]) + Buffer.byteLength(rows[i]![6]),
      maxBytes,
    );
    if (keep === rows.length) return { events: this.toEvents(rows), cut: false };
    return { events: this.toEvents(rows.slice(0, keep)), cut: true };
  }

  /** A partition filter's reads go through the index of its count: created here when missing. */
  private partitionIndex(filter: EventFilter): void {
    if (!filter.partition) return;
    const count = filter.partition.count;
    retryWhileBusy(() => ensurePartitionIndex(this.db, count), this.busyTimeoutMs);
  }

  async migrationStatus(): Promise<MigrationStatus> {
    this.assertOpen();
    return migrationStatus(schemaVersion(this.db), STORE_MIGRATIONS);
  }

  /** Rows as events; upcast here unless encrypted (then `readable` upcasts once they are decrypted). */
  private toEvents(rows: EventTuple[]): RecordedEvent[] {
    const events = tuplesToRecordedEvents(rows);
    return this.upcast === null || this.cipher !== null ? events : this.upcast(events);
  }

  /** Decrypts (with `encrypt`) and then upcasts the events of a page; as they are otherwise. */
  private readable(events: RecordedEvent[]): Promise<RecordedEvent[]> {
    const cipher = this.cipher;
    if (cipher === null) return Promise.resolve(events);
    const upcast = this.upcast;
    return cipher.open(events).then((opened) => (upcast === null ? opened : upcast(opened)));
  }

  /**
   * Crypto-shredding: deletes the subject's key, so that its events read back with `data: null` and
   * `metadata.shredded: true` (ids, versions and positions stay). `shredded` is false when the
   * subject had no key. A store opened without `encrypt` deletes from its own key table (for
   * `idem shred`); with your own `keys`, this deletes from your key provider.
   */
  async shred(subject: string): Promise<ShredResult> {
    this.assertOpen();
    const s = validateSubject(subject, 'subject');
    const log = (this.shredLog ??= new SqliteShredLog(this.db));
    const keys = this.cipher?.keys;
    if (keys !== undefined && !(keys instanceof SqliteSubjectKeys)) {
      // Your key provider: its deletion cannot share the store's transaction, so the log follows it
      // (a shred repeated after a crash in between records the streams then).
      const shredded = await keys.delete(s);
      await this.batcher.enqueueWrite(() => log.record(s));
      return { subject, shredded };
    }
    return { subject, shredded: await this.batcher.enqueueWrite(() => log.deleteKeyAndRecord(s)) };
  }

  /** The shred log after `afterSeq` (see `EventStore.shreds`). */
  async shreds(afterSeq: number, limit?: number): Promise<ShredRecord[]> {
    this.assertOpen();
    const r = validateShredsRange(afterSeq, limit);
    const log = (this.shredLog ??= new SqliteShredLog(this.db));
    return log.after(r.after, r.limit);
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

function noStoreAt(path: string): StoreNotFoundError {
  return new StoreNotFoundError(`no store at ${path}`, { path });
}

/** Refuses a file without the store's tables: `create: false` must not turn another file into a store. */
function requireStoreTables(db: Database.Database, path: string): void {
  if (schemaVersion(db) === 0) throw noStoreAt(path);
}

/** Opens (creating and migrating when needed, unless `create: false`) an embedded store file. */
export async function openSqliteStore(options: SqliteStoreOptions): Promise<SqliteEventStore> {
  return new SqliteEventStore(options);
}
