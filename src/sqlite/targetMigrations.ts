import type { Migration } from './migrations.js';
import { OUTBOX_MIGRATION } from './targetOutbox.js';

/** The table that records which target migrations a database has (separate from the store's `idem_schema`). */
export const TARGET_SCHEMA_TABLE = 'idem_target_schema';

/**
 * The SQLite target's schema: the processed ledger, checkpoints, entity versions and the additive
 * counters (1), the effect outbox (2), the ledger keyed by a consumer id (3), the pruned ledger
 * horizon of each checkpoint (4). Append new steps at
 * the end; never edit a released one.
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
  {
    version: 3,
    name: 'ledger keyed by consumer id',
    // The ledger's rows carried the consumer's name and a timestamp: about 90 bytes a row, for a
    // 36-character key. Keyed by a small integer instead they take about half the pages, so a batch's
    // inserts and lookups touch half as many (about a third less time per row, with UUIDv7 keys and
    // with random ones: see docs/benchmarks.md). The rows of version 1's table are moved over.
    up: (db) => {
      db.exec(`
        CREATE TABLE idem_target_consumers (
          id       INTEGER PRIMARY KEY,
          consumer TEXT    NOT NULL UNIQUE
        );
        CREATE TABLE idem_ledger (
          consumer_id INTEGER NOT NULL,
          key         TEXT    NOT NULL,
          position    INTEGER NOT NULL,
          PRIMARY KEY (consumer_id, key)
        ) WITHOUT ROWID;
        INSERT INTO idem_target_consumers (consumer) SELECT DISTINCT consumer FROM idem_processed ORDER BY consumer;
        INSERT INTO idem_ledger (consumer_id, key, position)
          SELECT c.id, p.key, p.position FROM idem_processed p JOIN idem_target_consumers c ON c.consumer = p.consumer;
        DROP TABLE idem_processed;
      `);
    },
  },
  {
    version: 4,
    name: 'pruned ledger horizon',
    // `pruneLedger` deletes ledger rows the checkpoint covers; the highest position it pruned through
    // is kept with the checkpoint, so that a reset below it can be refused.
    up: (db) => {
      db.exec('ALTER TABLE idem_checkpoints ADD COLUMN ledger_horizon INTEGER NOT NULL DEFAULT 0');
    },
  },
  {
    version: 5,
    name: 'shred cursors',
    // The last entry of the store's shred log each consumer handled (crypto-shredding: `onShred`).
    up: (db) => {
      db.exec(`
        CREATE TABLE idem_shred_cursors (
          consumer TEXT    PRIMARY KEY,
          seq      INTEGER NOT NULL
        ) WITHOUT ROWID;
      `);
    },
  },
  {
    version: 6,
    name: 'effect trace context',
    // The W3C traceparent of the event (or handler span) that wrote the effect, so that its dispatch
    // is a span of the same trace. Null for rows written before, or without tracing.
    up: (db) => {
      db.exec('ALTER TABLE idem_effects ADD COLUMN traceparent TEXT');
    },
  },
];
