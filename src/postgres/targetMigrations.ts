import { runPgMigrations } from './migrations.js';
import type { Pool } from 'pg';
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
  {
    // The ledger has one name on every target: `target_ledger` here, `idem_ledger` on SQLite.
    version: 3,
    name: 'ledger table named target_ledger',
    sql: (s) => `
      ALTER TABLE ${s}.target_processed RENAME TO target_ledger;
      ALTER INDEX ${s}.target_processed_pkey RENAME TO target_ledger_pkey;
    `,
  },
  {
    // `pruneLedger` deletes ledger rows the checkpoint covers; the highest position it pruned through
    // is kept with the checkpoint, so that a reset below it can be refused.
    version: 4,
    name: 'pruned ledger horizon',
    sql: (s) => `ALTER TABLE ${s}.target_checkpoints ADD COLUMN ledger_horizon bigint NOT NULL DEFAULT 0;`,
  },
  {
    version: 5,
    name: 'shred cursors',
    // The last entry of the store's shred log each consumer handled (crypto-shredding: `onShred`).
    sql: (s) => `
      CREATE TABLE ${s}.target_shred_cursors (
        consumer text   PRIMARY KEY,
        seq      bigint NOT NULL
      );
    `,
  },
  {
    // The W3C traceparent of the event (or handler span) that wrote the effect, so that its dispatch
    // is a span of the same trace. Null for rows written before, or without tracing.
    version: 6,
    name: 'effect trace context',
    sql: (s) => `ALTER TABLE ${s}.target_effects ADD COLUMN traceparent text;`,
  },
];

/**
 * Brings the target's tables in `schema` up to date. Safe when several processes start at once (see
 * `runPgMigrations`). Versions live in `target_migrations`, apart from the store's, under their own
 * advisory-lock class, so a store and a target may share one schema. `migrations` is for tests that
 * build a target as an older version left it.
 */
export function migrateTarget(
  pool: Pool,
  schema: string,
  migrations: readonly TargetMigration[] = TARGET_MIGRATIONS,
): Promise<number> {
  return runPgMigrations({ pool, schema }, migrations, {
    table: 'target_migrations',
    lockClass: TARGET_LOCK_CLASS,
  });
}
