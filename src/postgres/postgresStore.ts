import { createHash } from 'node:crypto';
import type { Client, Pool } from 'pg';
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
import { filterKey, streamProbes, type EventFilter } from '../core/filter.js';
import { CHECKS_APPENDS_FIRST, resolveStoreLimits, type StoreLimits } from '../core/limits.js';
import { migrationStatus, type MigrationStatus } from '../core/migrationStatus.js';
import { readAllTable, readStreamTable } from '../core/readPages.js';
import { compileUpcasters, type UpcastEvents, type Upcasters } from '../core/upcasters.js';
import {
  validateShredsRange,
  validateSubject,
  resolveEncryptOptions,
  type EncryptOptions,
  type EventCipher,
  type KeyProvider,
} from '../core/encryption.js';
import {
  PostgresSubjectKeys,
  SHRED_LOG_MIGRATION,
  shredInStore,
  shredsAfter,
  SUBJECT_KEYS_MIGRATION,
} from './subjectKeys.js';
import { QueryCache } from '../core/queryCache.js';
import type { ConsumerAdmin, DeadLetterAdmin, SubscribeOptions, Subscription } from '../core/subscription.js';
import { countWithinBytes } from '../core/pageBytes.js';
import { streamHash } from '../core/streamHash.js';
import { validateStreamName } from '../core/validation.js';
import { AppendBatcher } from './appendBatcher.js';
import { appendEvents } from './appendEvents.js';
import { AppendNotifier } from './appendNotifier.js';
import { RETRY_OPTION_KEYS, withReconnect, type RetryOptions } from './connectionFaults.js';
import { guardPool, KeptClients } from './checkout.js';
import {
  EVENT_TUPLE_COLUMNS,
  STREAM_TUPLE_COLUMNS,
  filterSql,
  isoText,
  partitionExpression,
  positionRange,
  tuplesToRecordedEvents,
  type PostgresEventTuple,
} from './eventRows.js';
import { loadPg } from './loadPg.js';
import {
  currentVersion,
  EVENT_STORE_MIGRATIONS,
  runPgMigrations,
  type PostgresMigration,
} from './migrations.js';
import { SUBSCRIPTION_MIGRATIONS } from './subscriptionSchema.js';
import { PostgresSubscriptionState } from './subscriptionState.js';
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
import {
  appendChannel,
  DEFAULT_SCHEMA,
  quoteSchema,
  statementName,
  validateSchemaName,
} from './schemaName.js';

/** The key of the empty filter (every event). */
const NO_FILTER = filterKey({});

/**
 * Filters per store whose subscription page (and, apart, whose `readAll` page) is named (see
 * `filterName`); also the shapes of `firstStreamMatch` that are named.
 */
const MAX_NAMED_FILTERS = 32;

/** A statement's text, and its name when it is prepared once per connection. */
interface NamedQuery {
  name?: string;
  text: string;
}
import { eventCount, traceAppend } from '../core/tracing.js';

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
  /**
   * Create the schema and the store's tables when they do not exist. With `false`, a schema without
   * them fails with `not_found` ("no idem store in schema X of DATABASE"), and nothing is created:
   * for tools that only read. @default true
   */
  create?: boolean;
  /** Applied to every event read (streams, `readAll`, subscriptions); see `Upcasters`. */
  upcasters?: Upcasters;
  /**
   * Send the append and read statements as named statements, prepared once per connection (no parse
   * and plan per call). Turn off behind a pooler that cannot keep them (PgBouncer in transaction
   * mode before 1.21, or without `max_prepared_statements`). @default true
   */
  preparedStatements?: boolean;
  /**
   * Crypto-shredding: the data of events whose `subject(event)` is not null is stored encrypted
   * (AES-256-GCM, one key per subject, in the schema's `subject_keys` table unless `keys` is given)
   * and decrypted on every read; `store.shred(subject)` deletes the key. See docs/data-lifecycle.md.
   */
  encrypt?: EncryptOptions;
}

const POSTGRES_STORE_OPTION_KEYS = {
  connectionString: true,
  pool: true,
  schema: true,
  limits: true,
  poolSize: true,
  pageSize: true,
  retry: true,
  pollIntervalMs: true,
  create: true,
  upcasters: true,
  preparedStatements: true,
  encrypt: true,
} as const satisfies KnownKeys<PostgresStoreOptions>;

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
  /** Appends and reads: clients kept between statements that follow one another (see checkout.ts). */
  private readonly clients: KeptClients;
  /** Reads are round trips: subscriptions read the next page while the current one is processed. */
  readonly readAhead = true;
  /** Page queries of `readAll` and the subscriptions, by filter. */
  private readonly pageQueries = new QueryCache<{ query: NamedQuery; params: string[][] }>();
  /** `readStream`'s page, a named statement: prepared once per connection. */
  private readonly streamQuery: NamedQuery;
  /** Whether statements are named (see `PostgresStoreOptions.preparedStatements`). */
  private readonly prepared: boolean;
  /** Scan queries of the subscriptions (`scanPage`), by filter. */
  private readonly scanQueries = new QueryCache<{ query: NamedQuery; params: string[][] }>();
  /** The filters whose subscription page, and whose `readAll` page, is named (see `filterName`). */
  private readonly namedFilters = { scan: new Set<string>(), read: new Set<string>() };
  /** The statement of `scanKeys`. */
  private keysQuery: { name?: string; text: string } | undefined;
  /** The shapes of the `firstStreamMatch` statement that are named, with their names (see `firstStreamMatch`). */
  private readonly matchShapes = new Map<string, { name?: string }>();
  /** The statement of `streamsMayMatch`. */
  private firstStreamsQuery: { name?: string; text: string } | undefined;
  /** The `firstStreams` asked for in this turn of the event loop, sent together at its end. */
  private probeQueue:
    | { texts: readonly string[]; resolve: (r: FirstStreams) => void; reject: (err: unknown) => void }[]
    | null = null;
  /** Whether the stream column sorts by code point (`streamsSortByCodePoint`), once asked. */
  private codePointOrder: Promise<boolean> | undefined;
  /** The statement of `groupKeys`. */
  private groupQuery: { name?: string; text: string } | undefined;
  /** Partition counts whose index exists or is being created (see `partitionIndex`). */
  private readonly partitionIndexes = new Map<number, Promise<void>>();
  private closed = false;
  /** Set only when upcasters are given, so that a read without them does nothing more per event. */
  readonly upcast: UpcastEvents | null;
  /** Set only with `encrypt`. */
  private readonly cipher: EventCipher | null;
  private faults = 0;

  private readonly subscriptions: SubscriptionService;
  readonly consumers: ConsumerAdmin;
  readonly deadLetters: DeadLetterAdmin;

  /** Internal: appends are checked against `limits` before anything else (see `CHECKS_APPENDS_FIRST`). */
  get [CHECKS_APPENDS_FIRST](): StoreLimits | null {
    return this.cipher === null ? this.limits : null;
  }

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
      upcast?: UpcastEvents | null;
      preparedStatements?: boolean;
      encrypt?: EncryptOptions;
    },
  ) {
    this.upcast = options.upcast ?? null;
    this.schema = options.schema;
    this.s = quoteSchema(options.schema);
    this.limits = options.limits;
    this.retry = options.retry;
    this.pageSize = options.pageSize;
    // Before the first `statementName` call, which reads it.
    this.prepared = options.preparedStatements ?? true;
    this.streamQuery = {
      ...this.statementName('read_stream'),
      text: `SELECT ${STREAM_TUPLE_COLUMNS} FROM ${this.s}.events WHERE stream = $1 AND version >= $2 ORDER BY version LIMIT $3`,
    };
    this.clients = new KeptClients(pool);
    this.batcher = new AppendBatcher({ clients: this.clients, s: this.s, preparedStatements: this.prepared });
    this.cipher = resolveEncryptOptions(
      options.encrypt,
      () => new PostgresSubjectKeys(pool, this.s, this.retry),
    );
    this.notifier = new AppendNotifier({
      makeClient,
      channel: appendChannel(options.schema),
      readHead: () => this.headPosition(),
      ...(options.pollIntervalMs === undefined ? {} : { pollIntervalMs: options.pollIntervalMs }),
    });
    this.subscriptions = new SubscriptionService(
      this,
      new PostgresSubscriptionState(pool, this.s, this.retry, this.prepared),
    );
    this.consumers = this.subscriptions.consumers;
    this.deadLetters = this.subscriptions.deadLetters;
  }

  append(stream: string, events: NewEvent[], options: AppendOptions = {}): Promise<AppendResult> {
    return traceAppend(stream, eventCount(events), () => this.appendNow(stream, events, options));
  }

  private async appendNow(stream: string, events: NewEvent[], options: AppendOptions): Promise<AppendResult> {
    this.assertOpen();
    if (this.cipher) {
      validateStreamName(stream);
      events = await this.cipher.seal(stream, events);
    }
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

  readStream(stream: string, options: ReadStreamOptions = {}): AsyncGenerator<RecordedEvent, undefined> {
    return readStreamTable(stream, options, this.pageSize, (version, size) => {
      this.assertOpen();
      return this.queryEvents(this.streamQuery, [stream, version, size], { stream });
    });
  }

  readAll(options: ReadAllOptions = {}): AsyncGenerator<RecordedEvent, undefined> {
    return readAllTable(options, this.pageSize, (after, filter, size) => this.readPage(after, filter, size));
  }

  /**
   * Internal (the subscription engine's read, and `readAll`'s pages): up to `limit` events after
   * `after` that match the normalised `filter`, in position order, in one query.
   */
  async readPage(
    after: number,
    filter: EventFilter,
    limit: number,
    maxBytes?: number,
  ): Promise<RecordedEvent[]> {
    this.assertOpen();
    await this.partitionIndex(filter);
    const key = filterKey(filter);
    const q = this.pageQueries.get(key, () => {
      const sql = filterSql(filter, 3);
      const text = `SELECT ${EVENT_TUPLE_COLUMNS}, octet_length(data::text) + octet_length(metadata::text)
          FROM ${this.s}.events WHERE ${positionRange(filter, '$1')} AND ${sql.where} ORDER BY position LIMIT $2`;
      // The last column, the events' JSON bytes, bounds a delivered page (`maxBytes`); json is kept
      // as text, so it costs no conversion. Named as a subscription's page is (see `filterName`).
      return { query: { ...this.filterName('read', key), text }, params: sql.params };
    });
    return this.queryEvents(q.query, [after, limit, ...q.params], { maxBytes });
  }

  /**
   * Internal (the subscription engine's read): up to `limit` matching events among the positions
   * after `after`, looking at no more than `maxScan` of them, and the head, in one statement. The
   * head row is the position allocator, updated in the appending transaction: the statement's
   * snapshot holds every event up to the head it sees and none beyond, so an unfilled page proves
   * there is nothing more up to there (no later commit can take a lower position). With `maxBytes`
   * the page ends before the event that would take it past that many bytes.
   */
  async scanPage(
    after: number,
    filter: EventFilter,
    limit: number,
    maxScan: number,
    maxBytes?: number,
  ): Promise<ScannedPage> {
    this.assertOpen();
    await this.partitionIndex(filter);
    const key = filterKey(filter);
    const q = this.scanQueries.get(key, () => {
      const sql = filterSql(filter, 4);
      // The event columns first, so each row reads as a `PostgresEventTuple`, then its JSON bytes;
      // the head last, also on the one row of nulls that says "no event matched".
      // (The head as a one-row subquery: planned as one row, the statement stays cheap enough that
      // PostgreSQL does not compile it with JIT, which costs more than the read.)
      const text = `SELECT e.*, h.position FROM (SELECT position FROM ${this.s}.head WHERE id LIMIT 1) h LEFT JOIN LATERAL (
            SELECT ${EVENT_TUPLE_COLUMNS}, octet_length(data::text) + octet_length(metadata::text) AS bytes
            FROM ${this.s}.events
            WHERE ${positionRange(filter, '$1', 'least(h.position, $1 + $3)')} AND ${sql.where}
            ORDER BY position LIMIT $2) e ON true`;
      return { query: { ...this.filterName('scan', key), text }, params: sql.params };
    });
    const query = q.query;
    const values = [after, limit, maxScan, ...q.params];
    const r = await withReconnect(
      () => this.pool.query<(string | null)[]>({ ...query, values, rowMode: 'array' }),
      this.retry,
      this.countFault,
    );
    const rows = r.rows;
    const head = Number(rows[0]?.[9] ?? 0);
    const end = scanEnd(after, head, maxScan);
    if (rows.length === 1 && rows[0]![0] === null) return scannedPage([], limit, end, head);
    const tuples = rows as unknown as PostgresEventTuple[];
    const keep =
      maxBytes === undefined
        ? tuples.length
        : countWithinBytes(tuples.length, (i) => Number(rows[i]![8]), maxBytes);
    const cut = keep < tuples.length;
    return scannedPage(await this.toEvents(cut ? tuples.slice(0, keep) : tuples), limit, end, head, cut);
  }

  /**
   * Internal (shared tail reads and lag): each event's position, stream, type and stream hash among
   * the positions after `after`, looking at no more than `maxScan`, and the head, in one statement
   * (the same snapshot, as `scanPage`).
   */
  async scanKeys(after: number, maxScan: number): Promise<KeyPage> {
    this.assertOpen();
    // The keys as one JSON text, parsed here by `JSON.parse`: a row per key made the driver parse
    // thousands of rows a second for idle subscriptions in a busy log (about 8 µs a row). One array
    // per column, no array per key (see `EventKeys`).
    this.keysQuery ??= {
      ...this.statementName('scan_keys'),
      text: `SELECT h.position, (
          SELECT json_build_array(coalesce(json_agg(e.position ORDER BY e.position), '[]'),
                                  coalesce(json_agg(e.stream ORDER BY e.position), '[]'),
                                  coalesce(json_agg(e.type ORDER BY e.position), '[]'),
                                  coalesce(json_agg(e.stream_hash ORDER BY e.position), '[]'))::text
            FROM ${this.s}.events e WHERE e.position > $1 AND e.position <= least(h.position, $1 + $2))
        FROM (SELECT position FROM ${this.s}.head WHERE id LIMIT 1) h`,
    };
    const query = this.keysQuery;
    const values = [after, maxScan];
    const r = await withReconnect(
      () => this.pool.query<(string | null)[]>({ ...query, values, rowMode: 'array' }),
      this.retry,
      this.countFault,
    );
    const row = r.rows[0];
    const head = Number(row?.[0] ?? 0);
    const [positions, streams, types, hashes] = JSON.parse(row?.[1] ?? '[[],[],[],[]]') as [
      number[],
      string[],
      string[],
      (number | null)[],
    ];
    // Rows written before the column existed may have no stream hash.
    for (let i = 0; i < hashes.length; i++) hashes[i] ??= streamHash(streams[i]!);
    return {
      positions,
      streams,
      types,
      hashes: hashes as number[],
      through: scanEnd(after, head, maxScan),
      head,
    };
  }

  /**
   * Internal (shared tail): the head, then the first position after `after` up to it whose stream is
   * in one of `categories` or starts with one of `prefixes`. Each new event's category, and its first
   * characters for each length of prefix, are looked up in hash tables of the categories and of the
   * prefixes of that length (hashed subplans, built once per execution), compared by code point
   * whatever the database's collation (an index range would follow the collation's order, where the
   * streams that share a prefix need not be adjacent). One anchored regular expression of a hundred
   * prefixes cost PostgreSQL 4 to 5 µs an event; the lookups cost about 0.6 µs (`bench/tailMatch.ts`,
   * docs/benchmarks.md). The statement's text depends on which lengths the prefixes have: each
   * such shape is named, for the first `MAX_NAMED_FILTERS` shapes.
   */
  async firstStreamMatch(
    after: number,
    prefixes: readonly string[],
    categories: readonly string[],
  ): Promise<{ head: number; first: number | null }> {
    this.assertOpen();
    const values: unknown[] = [after];
    const tests: string[] = [];
    const lookup = (list: string[]): string => {
      values.push(list);
      return `IN (SELECT u.t COLLATE "C" FROM unnest($${values.length}::text[]) AS u(t))`;
    };
    // A category holds no '-' (a stream's category is what precedes its first one).
    const wanted = categories.filter((c) => !c.includes('-'));
    if (wanted.length > 0) tests.push(`split_part(e.stream, '-', 1) COLLATE "C" ${lookup(wanted)}`);
    // PostgreSQL's left() counts characters (code points), not UTF-16 units.
    const byLength = new Map<number, string[]>();
    for (const p of prefixes) {
      const length = [...p].length;
      const group = byLength.get(length);
      if (group) group.push(p);
      else byLength.set(length, [p]);
    }
    const lengths = [...byLength.keys()].sort((a, b) => a - b);
    for (const length of lengths)
      tests.push(`left(e.stream, ${length}) COLLATE "C" ${lookup(byLength.get(length)!)}`);
    const shape = `${wanted.length > 0 ? 'c' : ''}:${lengths.join(',')}`;
    const text = `SELECT h.position, (
          SELECT min(e.position) FROM ${this.s}.events e
           WHERE e.position > $1 AND e.position <= h.position AND (${tests.length === 0 ? 'false' : tests.join(' OR ')}))
        FROM (SELECT position FROM ${this.s}.head WHERE id LIMIT 1) h`;
    let name = this.matchShapes.get(shape);
    if (name === undefined) {
      name =
        this.prepared && this.matchShapes.size < MAX_NAMED_FILTERS
          ? this.statementName(`first_match_${createHash('sha256').update(shape).digest('hex').slice(0, 12)}`)
          : {};
      if (name.name !== undefined) this.matchShapes.set(shape, name);
    }
    const r = await withReconnect(
      () => this.pool.query<(string | null)[]>({ ...name, text, values, rowMode: 'array' }),
      this.retry,
      this.countFault,
    );
    const row = r.rows[0];
    return { head: Number(row?.[0] ?? 0), first: row?.[1] == null ? null : Number(row[1]) };
  }

  /**
   * Internal (shared tail): whether a stored stream is in one of the filter's categories or starts
   * with one of its prefixes, and the head when none is, as SQLite's: where the events' stream column
   * sorts by code point (see `streamsSortByCodePoint`), the streams that share a prefix sit together
   * in the `(stream, version)` index, and the first stream at or after each probe text tells, all
   * probes in one statement. Under any other collation, and for a filter with neither, it answers
   * `may: true` (it cannot tell) without a statement, and the tail reads keys as before.
   */
  async streamsMayMatch(filter: EventFilter): Promise<StreamsAnswer> {
    this.assertOpen();
    const probes = streamProbes(filter);
    if (probes === null || !(await this.streamsSortByCodePoint())) return { may: true };
    const { head, firsts } = await this.firstStreams(probes.map((p) => p.text));
    return probes.some((p) => p.wants(firsts.get(p.text))) ? { may: true } : { may: false, head };
  }

  /**
   * The head, then the first stored stream at or after each text. The texts asked for in the same
   * turn of the event loop go in one statement: the resting subscriptions of a process wake together
   * (for the check for retried dead letters), each with a filter of its own.
   */
  private firstStreams(texts: readonly string[]): Promise<FirstStreams> {
    return new Promise<FirstStreams>((resolve, reject) => {
      if (this.probeQueue === null) {
        this.probeQueue = [];
        setImmediate(() => void this.probeNow());
      }
      this.probeQueue.push({ texts, resolve, reject });
    });
  }

  private async probeNow(): Promise<void> {
    const asked = this.probeQueue ?? [];
    this.probeQueue = null;
    const texts = [...new Set(asked.flatMap((a) => a.texts))];
    this.firstStreamsQuery ??= {
      ...this.statementName('first_streams'),
      text: `SELECT h.position, ARRAY(
          SELECT (SELECT e.stream FROM ${this.s}.events e WHERE e.stream >= p.t ORDER BY e.stream LIMIT 1)
            FROM unnest($1::text[]) WITH ORDINALITY AS p(t, k) ORDER BY p.k)
        FROM (SELECT position FROM ${this.s}.head WHERE id LIMIT 1) h`,
    };
    const query = this.firstStreamsQuery;
    try {
      const r = await withReconnect(
        () => this.pool.query<[string, (string | null)[]]>({ ...query, values: [texts], rowMode: 'array' }),
        this.retry,
        this.countFault,
      );
      const row = r.rows[0];
      const found = row?.[1] ?? [];
      const answer: FirstStreams = {
        head: Number(row?.[0] ?? 0),
        firsts: new Map(texts.map((t, i) => [t, found[i] ?? undefined])),
      };
      for (const a of asked) a.resolve(answer);
    } catch (err) {
      for (const a of asked) a.reject(err);
    }
  }

  /**
   * Whether the events' stream column sorts by code point, asked once: its collation is "C" or
   * "POSIX", or the database's default is libc's "C" or "C.UTF-8" and sorts a set of texts that
   * other collations order differently (case, punctuation, accents, characters beyond the BMP) as
   * code points would.
   */
  private streamsSortByCodePoint(): Promise<boolean> {
    this.codePointOrder ??= withReconnect(
      () =>
        this.pool.query<[string, string, string[]]>({
          text: `SELECT c.collname, d.datcollate, ARRAY(SELECT x FROM unnest($2::text[]) AS x ORDER BY x)
              FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation, pg_database d
             WHERE a.attrelid = to_regclass($1) AND a.attname = 'stream' AND d.datname = current_database()`,
          values: [`${this.s}.events`, ORDER_SAMPLES],
          rowMode: 'array',
        }),
      this.retry,
      this.countFault,
    ).then(
      (r) => {
        const [collation, databaseCollation, sorted] = r.rows[0] ?? [];
        if (collation === 'C' || collation === 'POSIX') return true;
        if (collation !== 'default' || !/^(C|POSIX|C\.UTF-?8)$/i.test(databaseCollation ?? '')) return false;
        const byCodePoint = [...ORDER_SAMPLES].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
        return sorted !== undefined && sorted.join('\u0000') === byCodePoint.join('\u0000');
      },
      (err: unknown) => {
        // Asked again next time.
        this.codePointOrder = undefined;
        throw err;
      },
    );
    return this.codePointOrder;
  }

  /** Internal (lag): the distinct stream and type pairs at positions in (`after`, `upTo`], with first and last positions. */
  async groupKeys(after: number, upTo: number): Promise<KeyGroup[]> {
    this.assertOpen();
    this.groupQuery ??= {
      ...this.statementName('group_keys'),
      text: `SELECT stream, type, stream_hash, min(position), max(position) FROM ${this.s}.events
        WHERE position > $1 AND position <= $2 GROUP BY stream, type, stream_hash`,
    };
    const query = this.groupQuery;
    const r = await withReconnect(
      () => this.pool.query<string[]>({ ...query, values: [after, upTo], rowMode: 'array' }),
      this.retry,
      this.countFault,
    );
    return r.rows.map(([stream, type, hash, first, last]): KeyGroup => {
      return [stream!, type!, Number(hash), Number(first), Number(last)];
    });
  }

  /**
   * A partition filter's reads go through the index of its count, `(stream_hash % count, position)`:
   * created on first use when missing (once per count a consumer group registers), so that a
   * partition's read costs in proportion to its events. Two processes creating it at once: the
   * loser's duplicate error is expected and ignored. The partitions of a group read at once share
   * the one check.
   */
  private partitionIndex(filter: EventFilter): Promise<void> {
    const count = filter.partition?.count;
    if (count === undefined) return Promise.resolve();
    let ready = this.partitionIndexes.get(count);
    if (!ready) {
      ready = this.createPartitionIndex(count);
      this.partitionIndexes.set(count, ready);
      // Failed (the store unreachable, say): the next read tries again.
      ready.catch(() => this.partitionIndexes.delete(count));
    }
    return ready;
  }

  /**
   * The partition index of `count`, with statistics of its expression: without them PostgreSQL takes
   * a partition for a two-hundredth of the log instead of `1/count`, estimates a read's window at a
   * few rows, and reads every matching event of the window through a bitmap scan and sorts them
   * rather than walking the index in order up to the page's limit (a catch-up page then reads up to
   * half as many rows again as it delivers). Expression statistics come from `ANALYZE` of the table,
   * which autovacuum may not run for a while, so it is run here when they are missing.
   */
  private async createPartitionIndex(count: number): Promise<void> {
    const index = `events_partition_${Math.trunc(count)}`;
    try {
      await this.query(
        `CREATE INDEX IF NOT EXISTS ${index} ON ${this.s}.events (${partitionExpression(count)}, position)`,
        [],
      );
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code !== '23505' && code !== '42P07') throw err;
    }
    const stats = await this.query(
      'SELECT 1 FROM pg_stats WHERE schemaname = $1 AND tablename = $2 LIMIT 1',
      [this.schema, index],
    );
    if (stats.length === 0) await this.query(`ANALYZE ${this.s}.events`);
  }

  /** Internal (lag): the events at positions in (`after`, `upTo`] that match `filter`, counted in one query. */
  async countMatching(after: number, upTo: number, filter: EventFilter): Promise<MatchCount> {
    this.assertOpen();
    await this.partitionIndex(filter);
    const sql = filterSql(filter, 3);
    const rows = await this.query<{ count: number; oldest: string | null }>(
      `SELECT count(*)::int AS count,
        ${isoText('min(recorded_at)')} AS oldest
        FROM ${this.s}.events WHERE ${positionRange(filter, '$1', '$2')} AND ${sql.where}`,
      [after, upTo, ...sql.params],
    );
    return { count: rows[0]?.count ?? 0, oldest: rows[0]?.oldest ?? null };
  }

  /**
   * Runs a read of `EVENT_TUPLE_COLUMNS` (rows as arrays: no object per row to build and drop), or of
   * `STREAM_TUPLE_COLUMNS` given the `stream` it reads. With `maxBytes`, the query's ninth column is
   * each row's size, and the page ends at that bound.
   */
  private async queryEvents(
    query: NamedQuery,
    values: unknown[],
    { maxBytes, stream }: { maxBytes?: number | undefined; stream?: string } = {},
  ): Promise<RecordedEvent[]> {
    const r = await withReconnect(
      () => this.clients.query<PostgresEventTuple>({ ...query, values, rowMode: 'array' }),
      this.retry,
      this.countFault,
    );
    const rows = r.rows;
    if (maxBytes === undefined) return this.toEvents(rows, stream);
    const sizeOf = (i: number): number => (rows[i] as unknown as number[])[8]!;
    const keep = countWithinBytes(rows.length, sizeOf, maxBytes);
    return this.toEvents(keep < rows.length ? rows.slice(0, keep) : rows, stream);
  }

  async migrationStatus(): Promise<MigrationStatus> {
    this.assertOpen();
    const current = await withReconnect(
      () => currentVersion({ pool: this.pool, schema: this.schema }),
      this.retry,
      this.countFault,
    );
    return migrationStatus(current, STORE_MIGRATIONS);
  }

  /** Rows as events (`stream`: see `tuplesToRecordedEvents`), decrypted (with `encrypt`) and then upcast. */
  private async toEvents(rows: PostgresEventTuple[], stream?: string): Promise<RecordedEvent[]> {
    let events = tuplesToRecordedEvents(rows, stream);
    if (this.cipher) events = await this.cipher.open(events);
    return this.upcast === null ? events : this.upcast(events);
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
    const keys = this.cipher?.keys;
    if (keys !== undefined && !(keys instanceof PostgresSubjectKeys)) {
      // Your key provider: its deletion cannot share the store's transaction, so the log follows it
      // (a shred repeated after a crash in between records the streams then).
      const shredded = await keys.delete(s);
      await shredInStore(this.pool, this.s, s, false, this.retry);
      return { subject, shredded };
    }
    return { subject, shredded: await shredInStore(this.pool, this.s, s, true, this.retry) };
  }

  /** The shred log after `afterSeq` (see `EventStore.shreds`). */
  async shreds(afterSeq: number, limit?: number): Promise<ShredRecord[]> {
    this.assertOpen();
    const r = validateShredsRange(afterSeq, limit);
    return shredsAfter(this.pool, this.s, r.after, r.limit, this.retry);
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

  /**
   * Internal (subscriptions): whether `onAppend` must hear other processes' commits. Off, the LISTEN
   * connection stays open but unlistens, so their notifications cost this process nothing.
   */
  hearOthers(on: boolean): void {
    this.notifier.want(on);
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
    this.clients.release();
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

  /**
   * The name of the statement of a subscription's page (`scan`) or of a `readAll` page (`read`): the
   * unfiltered one's, and one per filter for the first `MAX_NAMED_FILTERS` filters this store reads
   * that way; beyond them, none (unnamed, planned per page), so that a server reading for many
   * filters does not keep a prepared statement for each on every pooled connection. A name is the
   * filter's hash, so two stores on one pool and schema name alike.
   */
  private filterName(what: 'scan' | 'read', key: string): { name?: string } {
    if (!this.prepared) return {};
    if (key === NO_FILTER) return this.statementName(what === 'scan' ? 'scan_page' : 'read_all');
    const named = this.namedFilters[what];
    if (!named.has(key)) {
      if (named.size >= MAX_NAMED_FILTERS) return {};
      named.add(key);
    }
    return this.statementName(`${what}_${createHash('sha256').update(key).digest('hex').slice(0, 12)}`);
  }

  /** `{ name }` for a named statement of this store, or nothing when statements are not prepared. */
  private statementName(what: string): { name?: string } {
    return this.prepared ? { name: statementName(what, this.s) } : {};
  }

  private assertOpen(): void {
    if (this.closed) throw new ClosedError('postgres store');
  }
}

/** Every schema step of the store: events (1, 3), consumer state (2), ledger horizons (4), subject keys (6), shred log (10). */
export const STORE_MIGRATIONS: readonly PostgresMigration[] = [
  ...EVENT_STORE_MIGRATIONS,
  ...SUBSCRIPTION_MIGRATIONS,
  SUBJECT_KEYS_MIGRATION,
  SHRED_LOG_MIGRATION,
];

/**
 * Texts that collations other than code-point order sort differently (`streamsSortByCodePoint`):
 * upper before lower case, punctuation and digits among letters, accents, a space, the last BMP
 * character before one beyond it.
 */
const ORDER_SAMPLES = [
  'a',
  'B',
  'A',
  'ab',
  'a-c',
  'a-',
  'a.',
  'a0',
  'a b',
  '_',
  '~',
  'e',
  'é',
  'f',
  'ss',
  'ß',
  'z',
  '\uFFFD',
  '\u{1F600}',
];

/** What `firstStreams` answers: the head, then the first stored stream at or after each text asked. */
interface FirstStreams {
  head: number;
  firsts: Map<string, string | undefined>;
}

/** A key provider never called: stands in for the store's own while `encrypt` is checked. */
const UNUSED_KEYS: KeyProvider = {
  keys: () => Promise.reject(new Error('unused')),
  create: () => Promise.reject(new Error('unused')),
  delete: () => Promise.reject(new Error('unused')),
};

/** Refuses a schema without the store's tables: `create: false` must not create them. */
async function requireStoreSchema(pool: Pool, schema: string): Promise<void> {
  if ((await currentVersion({ pool, schema })) > 0) return;
  const r = await pool.query<{ db: string }>('SELECT current_database() AS db');
  const database = r.rows[0]?.db ?? '?';
  throw new StoreNotFoundError(`no idem store in schema ${schema} of ${database}`, { schema, database });
}

/**
 * Opens the PostgreSQL event store: loads `pg`, connects, and brings the schema up to date (safe when
 * several processes open the same schema at once).
 */
export async function openPostgresStore(options: PostgresStoreOptions): Promise<PostgresEventStore> {
  if (options === undefined) throw new InvalidInputError('options', 'must be an object');
  checkKnownKeys(options, POSTGRES_STORE_OPTION_KEYS, '');
  checkKnownKeys(options.retry, RETRY_OPTION_KEYS, 'retry');
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
  const upcast = compileUpcasters(options.upcasters);
  // Checked before a pool is made (the store's own key table is only named here).
  resolveEncryptOptions(options.encrypt, () => UNUSED_KEYS);
  const poolSize = options.poolSize ?? 10;
  if (!Number.isSafeInteger(poolSize) || poolSize < 1)
    throw new InvalidInputError('poolSize', 'must be an integer >= 1');
  const pageSize = options.pageSize ?? 500;
  if (!Number.isSafeInteger(pageSize) || pageSize < 1)
    throw new InvalidInputError('pageSize', 'must be an integer >= 1');
  const create = options.create ?? true;
  if (typeof create !== 'boolean') throw new InvalidInputError('create', 'must be a boolean');
  const preparedStatements = options.preparedStatements ?? true;
  if (typeof preparedStatements !== 'boolean')
    throw new InvalidInputError('preparedStatements', 'must be a boolean');
  const limits = resolveStoreLimits(options.limits);
  const pg = await loadPg();
  const pool = givenPool ?? new pg.Pool({ connectionString, max: poolSize });
  guardPool(pool);
  const clientConfig = givenPool ? givenPool.options : { connectionString };
  const store = new PostgresEventStore(pool, givenPool === undefined, () => new pg.Client(clientConfig), {
    schema,
    limits,
    retry: options.retry ?? {},
    pageSize,
    upcast,
    preparedStatements,
    ...(options.encrypt === undefined ? {} : { encrypt: options.encrypt }),
    ...(options.pollIntervalMs === undefined ? {} : { pollIntervalMs: options.pollIntervalMs }),
  });
  try {
    if (!create) await withReconnect(() => requireStoreSchema(pool, schema), options.retry);
    await withReconnect(() => runPgMigrations({ pool, schema }, STORE_MIGRATIONS), options.retry);
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}
