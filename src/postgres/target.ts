import { checkout, guardPool } from './checkout.js';
import type { Pool, PoolClient, QueryConfig } from 'pg';
import type {
  BatchRecord,
  ConsumerTarget,
  PruneLedgerOptions,
  PruneLedgerResult,
  TargetCheckpoint,
  TargetTransaction,
} from '../core/consumerTarget.js';
import { ClosedError, InvalidInputError } from '../core/errors.js';
import { DEFAULT_SCHEMA, quoteSchema, validateSchemaName } from './schemaName.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';
import { resolvePruneOptions } from '../core/ledgerRetention.js';
import { migrateTarget } from './targetMigrations.js';
import { PostgresOutbox } from './targetOutbox.js';

export interface PostgresTargetOptions {
  /** The schema of the target's tables (ledger, checkpoints, entity versions, counters). @default 'idem' */
  schema?: string;
}

const POSTGRES_TARGET_OPTION_KEYS = { schema: true } as const satisfies KnownKeys<PostgresTargetOptions>;

/** The target's SQL for one schema, as named (server-side prepared) statements. */
class TargetSql {
  readonly checkpoint: string;
  readonly processed: string;
  readonly versions: string;
  readonly record: string;
  readonly addOnce: string;
  readonly readCheckpoint: string;
  readonly ledgerSize: string;
  readonly counter: string;
  readonly horizon: string;
  readonly lockHorizon: string;
  readonly prunePoint: string;
  readonly prune: string;
  readonly forget: string;
  readonly shredCursor: string;
  readonly setShredCursor: string;

  constructor(readonly schema: string) {
    const s = quoteSchema(schema);
    // Upserting the row locks it for the transaction: two owners' batches of one consumer serialise here.
    this.checkpoint = `INSERT INTO ${s}.target_checkpoints (consumer, position, epoch) VALUES ($1, 0, 0)
      ON CONFLICT (consumer) DO UPDATE SET consumer = excluded.consumer
      RETURNING position::float8 AS position, epoch::float8 AS epoch`;
    // One index probe per key, whatever the planner believes about the table's size: `key = ANY($2)`
    // was planned while the ledger was empty (no statistics yet) as a scan of all the consumer's rows
    // filtered by the array, which grows with the ledger (hundreds of ms per batch at 50,000 rows).
    // The LIMIT keeps the subquery from being flattened into a hash join. Both lookups run as unnamed
    // statements (planned per batch), since a cached generic plan made on a small table would keep a
    // sequential scan per key.
    this.processed = `SELECT u.key FROM unnest($2::text[]) AS u(key)
      CROSS JOIN LATERAL (SELECT 1 FROM ${s}.target_ledger p WHERE p.consumer = $1 AND p.key = u.key LIMIT 1) AS hit`;
    this.versions = `SELECT u.stream, hit.version FROM unnest($2::text[]) AS u(stream)
      CROSS JOIN LATERAL (SELECT v.version FROM ${s}.target_entity_versions v WHERE v.consumer = $1 AND v.stream = u.stream LIMIT 1) AS hit`;
    this.record = `WITH ledger AS (
        INSERT INTO ${s}.target_ledger (consumer, key, position)
        SELECT $1, k, p FROM unnest($2::text[], $3::bigint[]) AS t(k, p)
      ), versions AS (
        INSERT INTO ${s}.target_entity_versions (consumer, stream, version)
        SELECT $1, st, ve FROM unnest($4::text[], $5::integer[]) AS u(st, ve)
        ON CONFLICT (consumer, stream) DO UPDATE SET version = excluded.version
      )
      UPDATE ${s}.target_checkpoints SET position = GREATEST(position, $6), epoch = GREATEST(epoch, $7), updated_at = now()
      WHERE consumer = $1`;
    this.addOnce = `WITH m AS (
        INSERT INTO ${s}.target_counter_members (counter, member, amount) VALUES ($1, $2, $3)
        ON CONFLICT DO NOTHING RETURNING amount
      )
      INSERT INTO ${s}.target_counters AS c (counter, value) SELECT $1, amount FROM m
      ON CONFLICT (counter) DO UPDATE SET value = c.value + excluded.value`;
    this.readCheckpoint = `SELECT position::float8 AS position, epoch::float8 AS epoch FROM ${s}.target_checkpoints WHERE consumer = $1`;
    this.ledgerSize = `SELECT count(*)::int AS n FROM ${s}.target_ledger WHERE consumer = $1`;
    this.counter = `SELECT value FROM ${s}.target_counters WHERE counter = $1`;
    this.horizon = `SELECT ledger_horizon::float8 AS horizon FROM ${s}.target_checkpoints WHERE consumer = $1`;
    // Locks the checkpoint row: a batch of the consumer waits for the prune, and the other way round.
    this.lockHorizon = `SELECT position::float8 AS position, ledger_horizon::float8 AS horizon
      FROM ${s}.target_checkpoints WHERE consumer = $1 FOR UPDATE`;
    // The position below the newest `keep` handled events at or below the bound.
    this.prunePoint = `SELECT DISTINCT position::float8 AS position FROM ${s}.target_ledger
      WHERE consumer = $1 AND position <= $2 ORDER BY position DESC LIMIT 1 OFFSET $3`;
    this.prune = `WITH gone AS (DELETE FROM ${s}.target_ledger WHERE consumer = $1 AND position <= $2 RETURNING 1)
      UPDATE ${s}.target_checkpoints SET ledger_horizon = GREATEST(ledger_horizon, $2)
      WHERE consumer = $1 RETURNING (SELECT count(*)::int FROM gone) AS deleted`;
    // The ledger rows are found by a scan of the consumer's rows (keyed by guard key): shreds are rare.
    this.forget = `WITH v AS (DELETE FROM ${s}.target_entity_versions WHERE consumer = $1 AND stream = $2)
      DELETE FROM ${s}.target_ledger WHERE consumer = $1 AND position = ANY($3::bigint[])`;
    this.shredCursor = `SELECT seq::float8 AS seq FROM ${s}.target_shred_cursors WHERE consumer = $1`;
    this.setShredCursor = `INSERT INTO ${s}.target_shred_cursors (consumer, seq) VALUES ($1, $2)
      ON CONFLICT (consumer) DO UPDATE SET seq = GREATEST(${s}.target_shred_cursors.seq, excluded.seq)`;
  }

  /** A named statement, prepared once per connection by `pg`. */
  q(name: StatementName, values: unknown[]): QueryConfig {
    return { name: statementName(name, this.schema), text: this[name], values };
  }

  /** An unnamed statement: planned on every execution with the table's current size. */
  unnamed(name: 'processed' | 'versions', values: unknown[]): QueryConfig {
    return { text: this[name], values };
  }
}

type StatementName =
  | 'checkpoint'
  | 'processed'
  | 'versions'
  | 'record'
  | 'addOnce'
  | 'readCheckpoint'
  | 'ledgerSize'
  | 'counter'
  | 'horizon'
  | 'lockHorizon'
  | 'prunePoint'
  | 'prune'
  | 'forget'
  | 'shredCursor'
  | 'setShredCursor';

/**
 * A prepared statement's name, unique per schema. PostgreSQL cuts names at 63 bytes, so a long
 * schema is shortened and told apart by a hash of the whole name.
 */
function statementName(name: StatementName, schema: string): string {
  const full = `idem_target_${name}_${schema}`;
  if (full.length <= 63) return full;
  let h = 0x811c9dc5;
  for (let i = 0; i < schema.length; i++) h = Math.imul(h ^ schema.charCodeAt(i), 0x01000193) >>> 0;
  return `idem_target_${name}_${h.toString(16)}_${schema}`.slice(0, 63);
}

class PostgresTargetTransaction implements TargetTransaction<PoolClient> {
  constructor(
    readonly tx: PoolClient,
    private readonly sql: TargetSql,
  ) {}

  async pruneLedger(consumer: string, options?: PruneLedgerOptions): Promise<PruneLedgerResult> {
    const { keep, through } = resolvePruneOptions(options);
    const q = (name: StatementName, values: unknown[]) => this.tx.query(this.sql.q(name, values));
    const cp = (await q('lockHorizon', [consumer])).rows[0] as
      { position: number; horizon: number } | undefined;
    if (!cp) return { deleted: 0, horizon: 0 };
    const bound = Math.min(cp.position, through);
    const upTo =
      keep === 0
        ? bound
        : (((await q('prunePoint', [consumer, bound, keep])).rows[0] as { position: number } | undefined)
            ?.position ?? 0);
    if (upTo <= cp.horizon) return { deleted: 0, horizon: cp.horizon };
    const r = (await q('prune', [consumer, upTo])).rows[0] as { deleted: number };
    return { deleted: r.deleted, horizon: upTo };
  }

  async checkpoint(consumer: string): Promise<TargetCheckpoint> {
    const r = await this.tx.query<TargetCheckpoint>(this.sql.q('checkpoint', [consumer]));
    return r.rows[0] ?? { position: 0, epoch: 0 };
  }

  async processedKeys(consumer: string, keys: readonly string[]): Promise<Set<string>> {
    const r = await this.tx.query<{ key: string }>(this.sql.unnamed('processed', [consumer, keys]));
    return new Set(r.rows.map((row) => row.key));
  }

  async entityVersions(consumer: string, streams: readonly string[]): Promise<Map<string, number>> {
    const r = await this.tx.query<{ stream: string; version: number }>(
      this.sql.unnamed('versions', [consumer, streams]),
    );
    return new Map(r.rows.map((row) => [row.stream, row.version]));
  }

  async savepoint(): Promise<void> {
    await this.tx.query('SAVEPOINT idem_event');
  }

  async releaseSavepoint(): Promise<void> {
    await this.tx.query('RELEASE SAVEPOINT idem_event');
  }

  async rollbackToSavepoint(): Promise<void> {
    await this.tx.query('ROLLBACK TO SAVEPOINT idem_event');
    await this.tx.query('RELEASE SAVEPOINT idem_event');
  }

  async record(consumer: string, r: BatchRecord): Promise<void> {
    const streams = [...r.versions.keys()];
    const versions = [...r.versions.values()];
    await this.tx.query(
      this.sql.q('record', [
        consumer,
        r.entries.map((e) => e.key),
        r.entries.map((e) => e.position),
        streams,
        versions,
        r.position,
        r.epoch,
      ]),
    );
  }

  async addOnce(counter: string, member: string, amount: number): Promise<boolean> {
    const r = await this.tx.query(this.sql.q('addOnce', [counter, member, amount]));
    return r.rowCount === 1;
  }

  async forgetEntity(consumer: string, stream: string, positions: readonly number[]): Promise<void> {
    await this.tx.query(this.sql.q('forget', [consumer, stream, positions]));
  }

  async setShredCursor(consumer: string, seq: number): Promise<void> {
    await this.tx.query(this.sql.q('setShredCursor', [consumer, seq]));
  }
}

/**
 * The PostgreSQL target: each batch takes a client from the pool, and the handler's writes, the ledger,
 * entity versions and the checkpoint commit in one transaction on it. The checkpoint row is locked
 * for the batch, so a stale owner's batch waits and is then fenced by its older epoch.
 */
export class PostgresTarget implements ConsumerTarget<PoolClient> {
  readonly kind = 'postgres';
  readonly schema: string;
  /** The effect outbox (see docs/effects-and-replay.md). */
  readonly outbox: PostgresOutbox;
  private readonly sql: TargetSql;
  private migrated: Promise<void> | null = null;
  private closed = false;

  constructor(
    readonly pool: Pool,
    options: PostgresTargetOptions = {},
  ) {
    if (!pool || typeof (pool as Partial<Pool>).connect !== 'function') {
      throw new InvalidInputError('pool', 'must be a pg Pool');
    }
    checkKnownKeys(options, POSTGRES_TARGET_OPTION_KEYS, 'options');
    this.schema = validateSchemaName(options.schema ?? DEFAULT_SCHEMA, 'schema');
    guardPool(pool);
    this.sql = new TargetSql(this.schema);
    this.outbox = new PostgresOutbox(this.schema);
  }

  migrate(): Promise<void> {
    if (this.closed) return Promise.reject(new ClosedError('PostgreSQL target'));
    this.migrated ??= migrateTarget(this.pool, this.schema).then(
      () => undefined,
      (err: unknown) => {
        this.migrated = null;
        throw err;
      },
    );
    return this.migrated;
  }

  async transaction<T>(fn: (t: TargetTransaction<PoolClient>) => Promise<T>): Promise<T> {
    await this.migrate();
    const { client, release } = await checkout(this.pool);
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      let result: T;
      try {
        result = await fn(new PostgresTargetTransaction(client, this.sql));
      } catch (err) {
        try {
          await client.query('ROLLBACK');
        } catch (rollbackError) {
          broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
        }
        throw err;
      }
      await client.query('COMMIT');
      return result;
    } catch (err) {
      broken ??= isConnectionError(err) ? (err as Error) : undefined;
      throw err;
    } finally {
      // A client whose connection failed is destroyed instead of going back to the pool.
      release(broken ?? false);
    }
  }

  private async read<R extends object>(
    name: 'readCheckpoint' | 'ledgerSize' | 'counter' | 'horizon' | 'shredCursor',
    values: unknown[],
  ): Promise<R | undefined> {
    await this.migrate();
    const r = await this.pool.query<R>(this.sql.q(name, values));
    return r.rows[0];
  }

  async readCheckpoint(consumer: string): Promise<TargetCheckpoint> {
    return (await this.read<TargetCheckpoint>('readCheckpoint', [consumer])) ?? { position: 0, epoch: 0 };
  }

  async ledgerSize(consumer: string): Promise<number> {
    return (await this.read<{ n: number }>('ledgerSize', [consumer]))?.n ?? 0;
  }

  async pruneLedger(consumer: string, options?: PruneLedgerOptions): Promise<PruneLedgerResult> {
    resolvePruneOptions(options);
    return this.transaction((t) => t.pruneLedger!(consumer, options));
  }

  async ledgerHorizon(consumer: string): Promise<number> {
    return (await this.read<{ horizon: number }>('horizon', [consumer]))?.horizon ?? 0;
  }

  async shredCursor(consumer: string): Promise<number> {
    return (await this.read<{ seq: number }>('shredCursor', [consumer]))?.seq ?? 0;
  }

  async counterValue(counter: string): Promise<number> {
    return (await this.read<{ value: number }>('counter', [counter]))?.value ?? 0;
  }

  /** The pool belongs to the caller: closing the target only stops using it. */
  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }
}

function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  // SQLSTATE class 08 is a connection exception; node errors (ECONNRESET, ...) carry no SQLSTATE.
  return typeof code === 'string'
    ? code.startsWith('08') || code.startsWith('E')
    : err instanceof Error && !('severity' in err);
}

/**
 * A consumer target in PostgreSQL over your `pg` pool. In handlers, `ctx.tx` is a pool client inside
 * BEGIN: run your writes with `ctx.tx.query(...)`. The target's tables live in `schema` (default `idem`).
 */
export function postgresTarget(pool: Pool, options?: PostgresTargetOptions): PostgresTarget {
  return new PostgresTarget(pool, options);
}
