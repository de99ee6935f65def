import { checkout } from './checkout.js';
import type { Pool } from 'pg';
import { quoteSchema } from './schemaName.js';
import { OUTBOX_MIGRATION } from './targetOutbox.js';

/** One numbered step of the PostgreSQL target's schema. Never edit a released one; append new ones. */
export interface TargetMigration {
  version: number;
  name: string;
  /** DDL for the quoted schema `s`. */
  sql: (s: string) => string;
}

/** The advisory-lock class of the target's migrations ('idet' in ASCII); the second key is the schema's hash. */
const TARGET_LOCK_CLASS = 0x69646574;

export const TARGET_MIGRATIONS: TargetMigration[] = [
  {
    version: 1,
    name: 'ledger, checkpoints, entity versions, counters',
    sql: (s) => `
      CREATE TABLE ${s}.target_processed (
        consumer     text        NOT NULL,
        key          text        NOT NULL,
        position     bigint      NOT NULL,
        processed_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (consumer, key)
      );
      CREATE TABLE ${s}.target_checkpoints (
        consumer   text        PRIMARY KEY,
        position   bigint      NOT NULL,
        epoch      bigint      NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE TABLE ${s}.target_entity_versions (
        consumer text    NOT NULL,
        stream   text    NOT NULL,
        version  integer NOT NULL,
        PRIMARY KEY (consumer, stream)
      );
      CREATE TABLE ${s}.target_counters (
        counter text             PRIMARY KEY,
        value   double precision NOT NULL
      );
      CREATE TABLE ${s}.target_counter_members (
        counter text             NOT NULL,
        member  text             NOT NULL,
        amount  double precision NOT NULL,
        PRIMARY KEY (counter, member)
      );
    `,
  },
  OUTBOX_MIGRATION,
];

/**
 * Brings the target's tables in `schema` up to date. Safe when several processes start at once: each
 * takes a transaction-scoped advisory lock on the schema first, so the second waits, then finds the
 * versions recorded and applies nothing. Versions live in `target_migrations`, apart from the store's.
 */
export async function migrateTarget(pool: Pool, schema: string): Promise<number> {
  const s = quoteSchema(schema);
  const latest = Math.max(0, ...TARGET_MIGRATIONS.map((m) => m.version));
  const exists = await pool.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [
    `${s}.target_migrations`,
  ]);
  if (exists.rows[0]?.t) {
    const v = await pool.query<{ v: number }>(
      `SELECT coalesce(max(version), 0)::int AS v FROM ${s}.target_migrations`,
    );
    if ((v.rows[0]?.v ?? 0) >= latest) return latest;
  }
  const { client, release } = await checkout(pool);
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [TARGET_LOCK_CLASS, schema]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${s}.target_migrations (
         version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const r = await client.query<{ v: number }>(
      `SELECT coalesce(max(version), 0)::int AS v FROM ${s}.target_migrations`,
    );
    let current = r.rows[0]?.v ?? 0;
    for (const m of [...TARGET_MIGRATIONS].sort((a, b) => a.version - b.version)) {
      if (m.version <= current) continue;
      await client.query(m.sql(s));
      await client.query(`INSERT INTO ${s}.target_migrations (version, name) VALUES ($1, $2)`, [
        m.version,
        m.name,
      ]);
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
