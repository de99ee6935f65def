import type { Migration } from './migrations.js';
import { OUTBOX_MIGRATION } from './targetOutbox.js';

/** The table that records which target migrations a database has (separate from the store's `idem_schema`). */
export const TARGET_SCHEMA_TABLE = 'idem_target_schema';

/**
 * The SQLite target's schema: the processed ledger, checkpoints, entity versions and the additive
 * counters. Append new steps at the end; never edit a released one.
 */
export const TARGET_MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'ledger, checkpoints, entity versions, counters',
    up: (db) => {
      db.exec(`
        CREATE TABLE idem_processed (
          consumer     TEXT    NOT NULL,
          key          TEXT    NOT NULL,
          position     INTEGER NOT NULL,
          processed_at TEXT    NOT NULL,
          PRIMARY KEY (consumer, key)
        ) WITHOUT ROWID;
        CREATE TABLE idem_checkpoints (
          consumer   TEXT    PRIMARY KEY,
          position   INTEGER NOT NULL,
          epoch      INTEGER NOT NULL,
          updated_at TEXT    NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE idem_entity_versions (
          consumer TEXT    NOT NULL,
          stream   TEXT    NOT NULL,
          version  INTEGER NOT NULL,
          PRIMARY KEY (consumer, stream)
        ) WITHOUT ROWID;
        CREATE TABLE idem_counters (
          counter TEXT PRIMARY KEY,
          value   REAL NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE idem_counter_members (
          counter TEXT NOT NULL,
          member  TEXT NOT NULL,
          amount  REAL NOT NULL,
          PRIMARY KEY (counter, member)
        ) WITHOUT ROWID;
      `);
    },
  },
  OUTBOX_MIGRATION,
];
