import type Database from 'better-sqlite3';

/**
 * The tables of consumer state (migration 2 of the embedded store). `lease_expires_at` is Unix
 * milliseconds so that lease checks compare numbers; every other time is ISO-8601 text.
 */
export function createSubscriptionTables(db: Database.Database): void {
  db.exec(`
    CREATE TABLE idem_consumers (
      name             TEXT    PRIMARY KEY,
      filter           TEXT    NOT NULL,
      filter_key       TEXT    NOT NULL,
      position         INTEGER NOT NULL,
      owner            TEXT,
      epoch            INTEGER NOT NULL DEFAULT 0,
      lease_expires_at INTEGER,
      status           TEXT    NOT NULL,
      last_error       TEXT,
      failed_event     TEXT,
      created_at       TEXT    NOT NULL,
      updated_at       TEXT    NOT NULL
    );
    CREATE TABLE idem_dead_letters (
      consumer   TEXT    NOT NULL,
      event_id   TEXT    NOT NULL,
      stream     TEXT    NOT NULL,
      position   INTEGER NOT NULL,
      event      TEXT    NOT NULL,
      reason     TEXT    NOT NULL,
      error      TEXT,
      attempts   INTEGER NOT NULL,
      status     TEXT    NOT NULL,
      behind     TEXT,
      parked_at  TEXT    NOT NULL,
      skipped_by TEXT,
      skipped_at TEXT,
      PRIMARY KEY (consumer, event_id)
    );
    CREATE INDEX idem_dead_letters_by_stream ON idem_dead_letters (consumer, stream, position);
    CREATE INDEX idem_dead_letters_by_status ON idem_dead_letters (consumer, status, position);
  `);
}

/** A consumer's pause (migration 3): its reason (null while not paused), since when, and by whom. */
export function addConsumerPause(db: Database.Database): void {
  db.exec(`
    ALTER TABLE idem_consumers ADD COLUMN pause_reason TEXT;
    ALTER TABLE idem_consumers ADD COLUMN paused_at    TEXT;
    ALTER TABLE idem_consumers ADD COLUMN paused_by    TEXT;
  `);
}

/**
 * Automatic redrive of dead letters (migration 4): how many were done, and when the next is due
 * (Unix milliseconds, null when none is scheduled).
 */
export function addDeadLetterRedrive(db: Database.Database): void {
  db.exec(`
    ALTER TABLE idem_dead_letters ADD COLUMN redrives   INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE idem_dead_letters ADD COLUMN redrive_at INTEGER;
    CREATE INDEX idem_dead_letters_redrive ON idem_dead_letters (consumer, redrive_at) WHERE redrive_at IS NOT NULL;
  `);
}
