import type Database from 'better-sqlite3';
import { addConsumerPause, addDeadLetterRedrive, createSubscriptionTables } from './subscriptionSchema.js';
import { streamHash } from '../core/streamHash.js';

/** One numbered schema step. Versions are 1, 2, 3, ... and never change once released. */
export interface Migration {
  version: number;
  name: string;
  up: (db: Database.Database) => void;
}

/**
 * The embedded store's schema. Append new steps at the end; never edit a released one.
 */
export const STORE_MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'events',
    up: (db) => {
      db.exec(`
        CREATE TABLE idem_events (
          position    INTEGER PRIMARY KEY,
          id          TEXT    NOT NULL UNIQUE,
          stream      TEXT    NOT NULL,
          version     INTEGER NOT NULL,
          type        TEXT    NOT NULL,
          data        TEXT    NOT NULL,
          metadata    TEXT    NOT NULL,
          recorded_at TEXT    NOT NULL,
          UNIQUE (stream, version)
        );
      `);
    },
  },
  {
    version: 2,
    name: 'subscriptions',
    up: createSubscriptionTables,
  },
  {
    version: 3,
    name: 'ledger horizons',
    // The position through which each consumer's target pruned its dedup ledger, as the consumer
    // runtime reports it: `consumers.reset` below it is refused.
    up: (db) => {
      db.exec(`
        CREATE TABLE idem_ledger_horizons (
          consumer TEXT    PRIMARY KEY,
          position INTEGER NOT NULL
        ) WITHOUT ROWID;
      `);
    },
  },
  {
    version: 4,
    name: 'subject keys',
    // One AES-256 key per subject for `encrypt`; deleting a row (`store.shred`) erases the data of
    // that subject's events.
    up: (db) => {
      db.exec(`
        CREATE TABLE idem_subject_keys (
          subject    TEXT PRIMARY KEY,
          key        BLOB NOT NULL,
          created_at TEXT NOT NULL
        ) WITHOUT ROWID;
      `);
    },
  },
  {
    version: 5,
    name: 'consumer pause',
    up: addConsumerPause,
  },
  {
    version: 6,
    name: 'dead-letter redrive',
    up: addDeadLetterRedrive,
  },
  {
    version: 7,
    name: 'stream hash',
    up: (db) => {
      // The partition key of consumer groups: `streamHash(stream)` (32-bit FNV-1a), written by every
      // append from now on and computed here for the events already stored.
      db.function('idem_stream_hash', { deterministic: true }, (stream: unknown) =>
        streamHash(String(stream)),
      );
      db.exec(`
        ALTER TABLE idem_events ADD COLUMN stream_hash INTEGER;
        UPDATE idem_events SET stream_hash = idem_stream_hash(stream);
      `);
    },
  },
  {
    version: 8,
    name: 'shred log',
    // One row per stream in which `shred(subject)` found the subject's events, written with the key's
    // deletion: consumers follow it to forget those entities in their targets.
    up: (db) => {
      db.exec(`
        CREATE TABLE idem_shreds (
          seq         INTEGER PRIMARY KEY,
          subject     TEXT    NOT NULL,
          stream      TEXT    NOT NULL,
          shredded_at TEXT    NOT NULL
        );
      `);
    },
  },
];

/**
 * Applies the missing migrations in one IMMEDIATE transaction. The write lock serialises processes
 * that open the same file at once: the second waits (busy timeout), then sees the version the first
 * recorded and applies nothing. A file already at the latest version is only read: opening it does
 * not wait for another process's write transaction (a process frozen inside one, say).
 */
export function runMigrations(
  db: Database.Database,
  migrations: readonly Migration[],
  table = 'idem_schema',
): number {
  const latest = migrations.reduce((v, m) => Math.max(v, m.version), 0);
  const found = schemaVersion(db, table);
  // Versions only grow, so a file read at the latest one stays there.
  if (found >= latest && found > 0) return found;
  const apply = db.transaction(() => {
    db.exec(
      `CREATE TABLE IF NOT EXISTS ${table} (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`,
    );
    const row = db.prepare(`SELECT coalesce(max(version), 0) AS v FROM ${table}`).get() as { v: number };
    let current = row.v;
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (m.version <= current) continue;
      m.up(db);
      db.prepare(`INSERT INTO ${table} (version, name, applied_at) VALUES (?, ?, ?)`).run(
        m.version,
        m.name,
        new Date().toISOString(),
      );
      current = m.version;
    }
    return current;
  });
  return apply.immediate();
}

/** The highest migration version recorded in the file (0 for a new file). */
export function schemaVersion(db: Database.Database, table = 'idem_schema'): number {
  const exists = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`).get(table);
  if (!exists) return 0;
  return (db.prepare(`SELECT coalesce(max(version), 0) AS v FROM ${table}`).get() as { v: number }).v;
}
