import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { RawRow } from './workload.js';

/** The same table as the embedded store's, so raw inserts pay for the same indexes. */
const EVENTS_DDL = `
  CREATE TABLE IF NOT EXISTS events (
    position    INTEGER PRIMARY KEY,
    id          TEXT    NOT NULL UNIQUE,
    stream      TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    type        TEXT    NOT NULL,
    data        TEXT    NOT NULL,
    metadata    TEXT    NOT NULL,
    recorded_at TEXT    NOT NULL,
    UNIQUE (stream, version)
  )`;

/**
 * The baseline writer: plain better-sqlite3 in WAL mode with synchronous=FULL, versions kept in a
 * Map in memory (no reads), rows inserted by one prepared statement.
 */
export class RawSqliteEvents {
  readonly db: Database.Database;
  private readonly insert: Database.Statement;
  private readonly versions = new Map<string, number>();
  private position = 0;

  constructor(dir: string, name: string) {
    this.db = new Database(join(dir, `${name}.db`));
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.exec(EVENTS_DDL);
    this.insert = this.db.prepare(
      'INSERT INTO events (position, id, stream, version, type, data, metadata, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    );
  }

  /** Inserts `rows` in one transaction (one fsync); answers the last row's position. */
  write(rows: readonly RawRow[]): number {
    const recordedAt = new Date().toISOString();
    this.db.transaction(() => {
      for (const r of rows) {
        const version = (this.versions.get(r.stream) ?? 0) + 1;
        this.versions.set(r.stream, version);
        this.insert.run(++this.position, r.id, r.stream, version, r.type, r.data, r.metadata, recordedAt);
      }
    })();
    return this.position;
  }

  close(): void {
    this.db.close();
  }
}
