import { checkout } from './checkout.js';
import type { Pool } from 'pg';
import { appendChannel, quoteSchema } from './schemaName.js';

/** One numbered schema step. Versions are 1, 2, 3, ... and never change once released. */
export interface PgMigration {
  version: number;
  name: string;
  /** The DDL for the schema `s` (already quoted), run inside the migration transaction. */
  sql: (s: string, schema: string) => string;
}

/** The advisory-lock class of idem's migrations ('idem' in ASCII); the second key is the schema's hash. */
const MIGRATION_LOCK_CLASS = 0x6964656d;

/**
 * The event store's schema. Append new steps at the end; never edit a released one.
 *
 * `head` is the position allocator: a single row whose update serialises appends until they commit,
 * so positions are handed out in commit order with no gaps (see docs/postgres.md).
 */
export const EVENT_STORE_MIGRATIONS: PgMigration[] = [
  {
    version: 1,
    name: 'events',
    sql: (s, schema) => `
      CREATE TABLE ${s}.events (
        position    bigint      PRIMARY KEY,
        id          uuid        NOT NULL UNIQUE,
        stream      text        NOT NULL,
        version     integer     NOT NULL,
        type        text        NOT NULL,
        data        json        NOT NULL,
        metadata    json        NOT NULL,
        recorded_at timestamptz NOT NULL,
        UNIQUE (stream, version)
      );
      CREATE TABLE ${s}.head (
        id       boolean PRIMARY KEY DEFAULT true CHECK (id),
        position bigint  NOT NULL
      );
      INSERT INTO ${s}.head (id, position) VALUES (true, 0);

      -- Several appends in one statement and one transaction (the store groups concurrent appends).
      -- The head row lock is taken first and held until commit: positions are handed out in commit
      -- order with no gaps, and every check below sees all earlier commits. Per append (events
      -- p_counts[i] long, flattened into the event arrays) the outcome is 'ok', 'exists' (one of its
      -- ids is already stored: the caller resolves idempotency) or 'wrong_expected_version'
      -- (version = the stream's actual version); nothing is written for the last two.
      CREATE FUNCTION ${s}.append_batch(
        p_streams text[], p_expected text[], p_counts integer[],
        p_ids uuid[], p_types text[], p_data text[], p_metadata text[]
      ) RETURNS TABLE (outcome text, version integer, first_position bigint, last_position bigint)
      LANGUAGE plpgsql AS $fn$
      DECLARE
        i         integer;
        n         integer;
        off       integer := 0;
        v_ids     uuid[];
        v_head    bigint;
        v_current integer;
        v_now     timestamptz;
        v_stream  text;
        v_exp     text;
      BEGIN
        SELECT h.position INTO v_head FROM ${s}.head h WHERE h.id FOR UPDATE;
        v_now := clock_timestamp();
        FOR i IN 1 .. coalesce(cardinality(p_streams), 0) LOOP
          n := p_counts[i];
          v_ids := p_ids[off + 1 : off + n];
          v_stream := p_streams[i];
          v_exp := p_expected[i];
          outcome := NULL; version := NULL; first_position := NULL; last_position := NULL;
          IF EXISTS (SELECT 1 FROM ${s}.events e WHERE e.id = ANY(v_ids)) THEN
            outcome := 'exists';
          ELSE
            SELECT coalesce(max(e.version), 0) INTO v_current FROM ${s}.events e WHERE e.stream = v_stream;
            IF NOT (v_exp = 'any'
                    OR (v_exp = 'no_stream' AND v_current = 0)
                    OR (v_exp = 'stream_exists' AND v_current > 0)
                    OR (v_exp ~ '^[0-9]+$' AND v_current::numeric = v_exp::numeric)) THEN
              outcome := 'wrong_expected_version';
              version := v_current;
            ELSE
              INSERT INTO ${s}.events (position, id, stream, version, type, data, metadata, recorded_at)
              SELECT v_head + t.ord, t.id, v_stream, v_current + t.ord, t.type, t.data::json, t.metadata::json, v_now
              FROM unnest(v_ids, p_types[off + 1 : off + n], p_data[off + 1 : off + n], p_metadata[off + 1 : off + n])
                   WITH ORDINALITY AS t(id, type, data, metadata, ord);
              outcome := 'ok';
              version := v_current + n;
              first_position := v_head + 1;
              last_position := v_head + n;
              v_head := v_head + n;
            END IF;
          END IF;
          off := off + n;
          RETURN NEXT;
        END LOOP;
        UPDATE ${s}.head h SET position = v_head WHERE h.id AND h.position <> v_head;
        IF FOUND THEN
          PERFORM pg_notify('${appendChannel(schema)}', v_head::text);
        END IF;
      END
      $fn$;
    `,
  },
];

export interface MigrationTarget {
  pool: Pool;
  /** Unquoted schema name (already validated). */
  schema: string;
}

/** Where a set of migrations records its versions, and the advisory-lock class that serialises it. */
export interface MigrationLedger {
  /** Table in the schema holding the applied versions. */
  table: string;
  lockClass: number;
}

/** The event store's ledger. */
export const STORE_LEDGER: MigrationLedger = { table: 'schema_migrations', lockClass: MIGRATION_LOCK_CLASS };

/**
 * Brings the schema up to the newest of `migrations` and returns its version. Safe when several
 * processes start at once: each takes a transaction-scoped advisory lock on the schema before
 * creating anything, so the second waits for the first, then sees the recorded versions and applies
 * nothing. A schema already up to date is recognised without taking the lock.
 */
export async function runPgMigrations(
  target: MigrationTarget,
  migrations: readonly PgMigration[],
  ledger: MigrationLedger = STORE_LEDGER,
): Promise<number> {
  const s = quoteSchema(target.schema);
  const table = `${s}.${ledger.table}`;
  const sorted = [...migrations].sort((a, b) => a.version - b.version);
  const latest = sorted[sorted.length - 1]?.version ?? 0;
  if ((await currentVersion(target, ledger)) >= latest) return latest;
  const { client, release } = await checkout(target.pool);
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [ledger.lockClass, target.schema]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${table} (
         version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const r = await client.query<{ v: number }>(`SELECT coalesce(max(version), 0)::int AS v FROM ${table}`);
    let current = r.rows[0]?.v ?? 0;
    for (const m of sorted) {
      if (m.version <= current) continue;
      await client.query(m.sql(s, target.schema));
      await client.query(`INSERT INTO ${table} (version, name) VALUES ($1, $2)`, [m.version, m.name]);
      current = m.version;
    }
    await client.query('COMMIT');
    release();
    return current;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    release(err instanceof Error ? err : true);
    throw err;
  }
}

/** The highest migration version recorded in the schema, 0 when it has none. */
export async function currentVersion(
  target: MigrationTarget,
  ledger: MigrationLedger = STORE_LEDGER,
): Promise<number> {
  const table = `${quoteSchema(target.schema)}.${ledger.table}`;
  const r = await target.pool.query<{ v: number | null }>(
    `SELECT CASE WHEN to_regclass($1) IS NULL THEN 0 END AS v`,
    [table],
  );
  if (r.rows[0]?.v === 0) return 0;
  const v = await target.pool.query<{ v: number }>(
    `SELECT coalesce(max(version), 0)::int AS v FROM ${table}`,
  );
  return v.rows[0]?.v ?? 0;
}
