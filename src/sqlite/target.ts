import type Database from 'better-sqlite3';
import type {
  BatchRecord,
  ConsumerTarget,
  PruneLedgerOptions,
  PruneLedgerResult,
  TargetCheckpoint,
  TargetTransaction,
} from '../core/consumerTarget.js';
import { ClosedError, InvalidInputError } from '../core/errors.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';
import { resolvePruneOptions } from '../core/ledgerRetention.js';
import { runMigrations } from './migrations.js';
import { openDatabase, retryWhileBusy } from './connection.js';
import { LEDGER_OF_CONSUMER } from './ledgerSql.js';
import { TARGET_MIGRATIONS, TARGET_SCHEMA_TABLE } from './targetMigrations.js';
import { SqliteOutbox } from './targetOutbox.js';
import { RowInserter } from './rowInserter.js';

export interface SqliteTargetOptions {
  /** When the target opens the file itself: `'full'` survives an OS crash, `'normal'` only a process kill. @default 'full' */
  durability?: 'full' | 'normal';
  /** How long a transaction waits for another connection's write lock, in ms (own connection only). @default 10000 */
  busyTimeoutMs?: number;
}

const SQLITE_TARGET_OPTION_KEYS = {
  durability: true,
  busyTimeoutMs: true,
} as const satisfies KnownKeys<SqliteTargetOptions>;

type Statement = Database.Statement<unknown[], unknown>;

/** The prepared statements of one connection. */
class TargetStatements {
  readonly begin: Statement;
  readonly commit: Statement;
  readonly rollback: Statement;
  readonly savepoint: Statement;
  readonly release: Statement;
  readonly rollbackTo: Statement;
  readonly checkpoint: Statement;
  readonly versions: Statement;
  readonly insertLedger: RowInserter;
  readonly upsertVersions: Statement;
  readonly upsertCheckpoint: Statement;
  readonly addMember: Statement;
  readonly addToCounter: Statement;
  readonly ledgerSize: Statement;
  readonly counter: Statement;
  readonly horizon: Statement;
  readonly prunePoint: Statement;
  readonly prune: Statement;
  readonly setHorizon: Statement;
  readonly forgetVersion: Statement;
  readonly forgetLedger: Statement;
  readonly shredCursor: Statement;
  readonly setShredCursor: Statement;
  private readonly consumerId: Statement;
  private readonly insertConsumer: Statement;

  private readonly isProcessed: Statement;
  /**
   * The ledger's consumer ids (`idem_target_consumers`) known to be committed. A row there is never
   * changed or deleted, so an id stays right for every connection once committed.
   */
  private readonly ids = new Map<string, number>();
  /** Ids read or made inside the open transaction: kept by `committed()`, dropped by `rolledBack()`. */
  private readonly pendingIds = new Map<string, number>();

  constructor(private readonly db: Database.Database) {
    this.begin = db.prepare('BEGIN IMMEDIATE');
    this.commit = db.prepare('COMMIT');
    this.rollback = db.prepare('ROLLBACK');
    this.savepoint = db.prepare('SAVEPOINT idem_event');
    this.release = db.prepare('RELEASE idem_event');
    this.rollbackTo = db.prepare('ROLLBACK TO idem_event');
    this.checkpoint = db.prepare('SELECT position, epoch FROM idem_checkpoints WHERE consumer = ?');
    this.versions = db.prepare(
      'SELECT stream, version FROM idem_entity_versions WHERE consumer = ? AND stream IN (SELECT value FROM json_each(?))',
    );
    // Prepared multi-row and row statements: with no round trips on SQLite, a prepared row statement
    // in a loop beat one statement over a JSON array (json_each + json_extract) by about a third for
    // 500 ledger rows, and 64 rows per statement take about two thirds of the loop's time again.
    this.insertLedger = new RowInserter(db, 'INSERT INTO idem_ledger (consumer_id, key, position)', 3);
    this.upsertVersions = db.prepare(
      `INSERT INTO idem_entity_versions (consumer, stream, version) VALUES (?, ?, ?)
       ON CONFLICT (consumer, stream) DO UPDATE SET version = excluded.version`,
    );
    this.upsertCheckpoint = db.prepare(
      `INSERT INTO idem_checkpoints (consumer, position, epoch, updated_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (consumer) DO UPDATE SET position = max(position, excluded.position),
         epoch = max(epoch, excluded.epoch), updated_at = excluded.updated_at`,
    );
    this.addMember = db.prepare(
      'INSERT INTO idem_counter_members (counter, member, amount) VALUES (?, ?, ?) ON CONFLICT DO NOTHING',
    );
    this.addToCounter = db.prepare(
      `INSERT INTO idem_counters (counter, value) VALUES (?, ?)
       ON CONFLICT (counter) DO UPDATE SET value = value + excluded.value`,
    );
    this.ledgerSize = db.prepare(`SELECT count(*) AS n ${LEDGER_OF_CONSUMER}`);
    this.isProcessed = db.prepare('SELECT 1 FROM idem_ledger WHERE consumer_id = ? AND key = ?').pluck();
    this.counter = db.prepare('SELECT value FROM idem_counters WHERE counter = ?');
    this.horizon = db.prepare(
      'SELECT position, ledger_horizon AS horizon FROM idem_checkpoints WHERE consumer = ?',
    );
    // The position below the newest `keep` handled events at or below the bound (a scan of the
    // consumer's rows: with a retention policy there are few of them).
    this.prunePoint = db
      .prepare(
        'SELECT DISTINCT position FROM idem_ledger WHERE consumer_id = ? AND position <= ? ORDER BY position DESC LIMIT 1 OFFSET ?',
      )
      .pluck();
    this.prune = db.prepare('DELETE FROM idem_ledger WHERE consumer_id = ? AND position <= ?');
    this.setHorizon = db.prepare(
      'UPDATE idem_checkpoints SET ledger_horizon = max(ledger_horizon, ?) WHERE consumer = ?',
    );
    this.forgetVersion = db.prepare('DELETE FROM idem_entity_versions WHERE consumer = ? AND stream = ?');
    // A scan of the consumer's ledger rows (keyed by guard key, not position): shreds are rare.
    this.forgetLedger = db.prepare(
      'DELETE FROM idem_ledger WHERE consumer_id = ? AND position IN (SELECT value FROM json_each(?))',
    );
    this.shredCursor = db.prepare('SELECT seq FROM idem_shred_cursors WHERE consumer = ?').pluck();
    this.setShredCursor = db.prepare(
      `INSERT INTO idem_shred_cursors (consumer, seq) VALUES (?, ?)
       ON CONFLICT (consumer) DO UPDATE SET seq = max(seq, excluded.seq)`,
    );
    this.consumerId = db.prepare('SELECT id FROM idem_target_consumers WHERE consumer = ?').pluck();
    this.insertConsumer = db.prepare('INSERT INTO idem_target_consumers (consumer) VALUES (?)');
  }

  /** The consumer's ledger id inside the open transaction, or `undefined` when it has none yet (and so no ledger rows). */
  existingId(consumer: string): number | undefined {
    let id = this.ids.get(consumer) ?? this.pendingIds.get(consumer);
    if (id === undefined) {
      id = this.consumerId.get(consumer) as number | undefined;
      if (id !== undefined) this.pendingIds.set(consumer, id);
    }
    return id;
  }

  /** The consumer's ledger id inside the open transaction, made when it has none. */
  idFor(consumer: string): number {
    let id = this.existingId(consumer);
    if (id === undefined) {
      id = Number(this.insertConsumer.run(consumer).lastInsertRowid);
      this.pendingIds.set(consumer, id);
    }
    return id;
  }

  /** After a commit: the ids of the transaction are committed too. */
  committed(): void {
    for (const [consumer, id] of this.pendingIds) this.ids.set(consumer, id);
    this.pendingIds.clear();
  }

  /** After a rollback: an id made in the transaction is gone, and may be given to another consumer. */
  rolledBack(): void {
    this.pendingIds.clear();
  }

  /**
   * Which of `keys` the consumer's ledger holds: one prepared lookup per key. On SQLite there is no
   * round trip to save, and a lookup per key is cheaper than a count over an IN list of a whole
   * batch of bound keys, which SQLite parses and plans afresh for each list length.
   */
  processed(consumer: string, keys: readonly string[]): Set<string> {
    const found = new Set<string>();
    const id = this.existingId(consumer);
    if (id === undefined) return found;
    const lookup = this.isProcessed;
    for (const key of keys) if (lookup.get(id, key) !== undefined) found.add(key);
    return found;
  }
}

class SqliteTargetTransaction implements TargetTransaction<Database.Database> {
  constructor(
    readonly tx: Database.Database,
    private readonly s: TargetStatements,
  ) {}

  pruneLedger(consumer: string, options?: PruneLedgerOptions): Promise<PruneLedgerResult> {
    const { keep, through } = resolvePruneOptions(options);
    const s = this.s;
    const cp = s.horizon.get(consumer) as { position: number; horizon: number } | undefined;
    const id = s.existingId(consumer);
    if (!cp || id === undefined) return Promise.resolve({ deleted: 0, horizon: cp?.horizon ?? 0 });
    const bound = Math.min(cp.position, through);
    const upTo = keep === 0 ? bound : ((s.prunePoint.get(id, bound, keep) as number | undefined) ?? 0);
    if (upTo <= cp.horizon) return Promise.resolve({ deleted: 0, horizon: cp.horizon });
    const deleted = s.prune.run(id, upTo).changes;
    s.setHorizon.run(upTo, consumer);
    return Promise.resolve({ deleted, horizon: Math.max(cp.horizon, upTo) });
  }

  checkpoint(consumer: string): Promise<TargetCheckpoint> {
    const row = this.s.checkpoint.get(consumer) as TargetCheckpoint | undefined;
    return Promise.resolve(row ?? { position: 0, epoch: 0 });
  }

  processedKeys(consumer: string, keys: readonly string[]): Promise<Set<string>> {
    return Promise.resolve(this.s.processed(consumer, keys));
  }

  entityVersions(consumer: string, streams: readonly string[]): Promise<Map<string, number>> {
    const rows = this.s.versions.raw().all(consumer, JSON.stringify(streams)) as [string, number][];
    return Promise.resolve(new Map(rows));
  }

  savepoint(): Promise<void> {
    this.s.savepoint.run();
    return Promise.resolve();
  }

  releaseSavepoint(): Promise<void> {
    this.s.release.run();
    return Promise.resolve();
  }

  rollbackToSavepoint(): Promise<void> {
    this.s.rollbackTo.run();
    this.s.release.run();
    // An id made after the savepoint is gone; the others are read again.
    this.s.rolledBack();
    return Promise.resolve();
  }

  record(consumer: string, r: BatchRecord): Promise<void> {
    const now = new Date().toISOString();
    const entries = r.entries;
    if (entries.length > 0) {
      const id = this.s.idFor(consumer);
      this.s.insertLedger.insert(entries.length, (params, at, i) => {
        const e = entries[i]!;
        params[at] = id;
        params[at + 1] = e.key;
        params[at + 2] = e.position;
      });
    }
    for (const [stream, version] of r.versions) this.s.upsertVersions.run(consumer, stream, version);
    this.s.upsertCheckpoint.run(consumer, r.position, r.epoch, now);
    return Promise.resolve();
  }

  addOnce(counter: string, member: string, amount: number): Promise<boolean> {
    if (this.s.addMember.run(counter, member, amount).changes === 0) return Promise.resolve(false);
    this.s.addToCounter.run(counter, amount);
    return Promise.resolve(true);
  }

  forgetEntity(consumer: string, stream: string, positions: readonly number[]): Promise<void> {
    this.s.forgetVersion.run(consumer, stream);
    const id = this.s.existingId(consumer);
    if (id !== undefined && positions.length > 0) this.s.forgetLedger.run(id, JSON.stringify(positions));
    return Promise.resolve();
  }

  setShredCursor(consumer: string, seq: number): Promise<void> {
    this.s.setShredCursor.run(consumer, seq);
    return Promise.resolve();
  }
}

/**
 * The SQLite target: the handler's writes, the ledger, entity versions and the checkpoint commit in one
 * `BEGIN IMMEDIATE` transaction on one connection. Transactions of consumers sharing the target run one
 * at a time. Give it its own file (or its own connection to a file): not the store's `db` handle.
 */
export class SqliteTarget implements ConsumerTarget<Database.Database> {
  readonly kind = 'sqlite';
  readonly db: Database.Database;
  /** The effect outbox (see docs/effects-and-replay.md). */
  readonly outbox = new SqliteOutbox();
  private readonly owned: boolean;
  private readonly busyTimeoutMs: number;
  private statements: TargetStatements | null = null;
  private migrated = false;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(pathOrDatabase: string | Database.Database, options: SqliteTargetOptions = {}) {
    checkKnownKeys(options, SQLITE_TARGET_OPTION_KEYS, 'options');
    this.busyTimeoutMs = options.busyTimeoutMs ?? 10_000;
    if (typeof pathOrDatabase === 'string') {
      if (pathOrDatabase.length === 0) throw new InvalidInputError('path', 'must be a non-empty file path');
      const durability = options.durability ?? 'full';
      if (durability !== 'full' && durability !== 'normal')
        throw new InvalidInputError('durability', "must be 'full' or 'normal'");
      this.db = openDatabase(pathOrDatabase, { durability, busyTimeoutMs: this.busyTimeoutMs });
      this.owned = true;
    } else if (pathOrDatabase && typeof pathOrDatabase.prepare === 'function') {
      this.db = pathOrDatabase;
      this.owned = false;
    } else {
      throw new InvalidInputError('pathOrDatabase', 'must be a file path or a better-sqlite3 Database');
    }
  }

  /** Runs `fn` after every earlier call has finished: one transaction at a time on the connection. */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private ready(): TargetStatements {
    if (this.closed) throw new ClosedError('SQLite target');
    if (!this.migrated) {
      retryWhileBusy(
        () => runMigrations(this.db, TARGET_MIGRATIONS, TARGET_SCHEMA_TABLE),
        this.busyTimeoutMs,
      );
      this.migrated = true;
    }
    this.statements ??= new TargetStatements(this.db);
    return this.statements;
  }

  migrate(): Promise<void> {
    return this.serial(() => {
      this.ready();
      return Promise.resolve();
    });
  }

  transaction<T>(fn: (t: TargetTransaction<Database.Database>) => Promise<T>): Promise<T> {
    return this.serial(async () => {
      const s = this.ready();
      if (this.db.inTransaction) {
        throw new InvalidInputError(
          'target',
          'the connection is already inside a transaction (give the target its own connection)',
        );
      }
      s.begin.run();
      let result: T;
      try {
        result = await fn(new SqliteTargetTransaction(this.db, s));
        s.commit.run();
      } catch (err) {
        if (this.db.inTransaction) s.rollback.run();
        s.rolledBack();
        throw err;
      }
      s.committed();
      return result;
    });
  }

  readCheckpoint(consumer: string): Promise<TargetCheckpoint> {
    return this.serial(() => {
      const row = this.ready().checkpoint.get(consumer) as TargetCheckpoint | undefined;
      return Promise.resolve(row ?? { position: 0, epoch: 0 });
    });
  }

  ledgerSize(consumer: string): Promise<number> {
    return this.serial(() => Promise.resolve((this.ready().ledgerSize.get(consumer) as { n: number }).n));
  }

  async pruneLedger(consumer: string, options?: PruneLedgerOptions): Promise<PruneLedgerResult> {
    resolvePruneOptions(options);
    return this.transaction((t) => t.pruneLedger!(consumer, options));
  }

  ledgerHorizon(consumer: string): Promise<number> {
    return this.serial(() => {
      const row = this.ready().horizon.get(consumer) as { horizon: number } | undefined;
      return Promise.resolve(row?.horizon ?? 0);
    });
  }

  shredCursor(consumer: string): Promise<number> {
    return this.serial(() =>
      Promise.resolve((this.ready().shredCursor.get(consumer) as number | undefined) ?? 0),
    );
  }

  counterValue(counter: string): Promise<number> {
    return this.serial(() => {
      const row = this.ready().counter.get(counter) as { value: number } | undefined;
      return Promise.resolve(row?.value ?? 0);
    });
  }

  close(): Promise<void> {
    return this.serial(() => {
      if (!this.closed) {
        this.closed = true;
        if (this.owned) this.db.close();
      }
      return Promise.resolve();
    });
  }
}

/**
 * A consumer target in SQLite: a file path (opened in WAL mode, with its own connection) or a
 * better-sqlite3 `Database` you opened. In handlers, `ctx.tx` is that `Database` inside the batch's transaction.
 */
export function sqliteTarget(
  pathOrDatabase: string | Database.Database,
  options?: SqliteTargetOptions,
): SqliteTarget {
  return new SqliteTarget(pathOrDatabase, options);
}
