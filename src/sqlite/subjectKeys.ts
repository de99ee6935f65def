import { randomBytes } from 'node:crypto';
import type Database from 'better-sqlite3';
import { ENVELOPE, type KeyProvider } from '../core/encryption.js';
import type { ShredRecord } from '../core/eventStore.js';

/**
 * The embedded store's own subject keys (table `idem_subject_keys`, store migration 4), in the
 * store's file: reads run directly, writes in the store's group commit.
 */
export class SqliteSubjectKeys implements KeyProvider {
  private readonly get: Database.Statement;

  constructor(
    private readonly db: Database.Database,
    private readonly write: <T>(fn: () => T) => Promise<T>,
  ) {
    this.get = db.prepare('SELECT key FROM idem_subject_keys WHERE subject = ?').pluck();
  }

  keys(subjects: readonly string[]): Promise<Map<string, Buffer>> {
    const out = new Map<string, Buffer>();
    for (const s of subjects) {
      const key = this.get.get(s) as Buffer | undefined;
      if (key) out.set(s, key);
    }
    return Promise.resolve(out);
  }

  create(subject: string): Promise<Buffer> {
    const fresh = randomBytes(32);
    return this.write(() => {
      // Two appends may make a subject's key at once: the first one stored wins.
      this.db
        .prepare(
          'INSERT INTO idem_subject_keys (subject, key, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING',
        )
        .run(subject, fresh, new Date().toISOString());
      return this.get.get(subject) as Buffer;
    });
  }

  delete(subject: string): Promise<boolean> {
    return this.write(
      () => this.db.prepare('DELETE FROM idem_subject_keys WHERE subject = ?').run(subject).changes > 0,
    );
  }
}

/**
 * The shred log (table `idem_shreds`): one row per stream in which `shred(subject)` found events
 * sealed with the subject's key. The streams are found by a scan of the events' stored envelopes
 * (a shred is rare; the scan reads the whole log once). Writes run inside the store's group commit.
 */
export class SqliteShredLog {
  private readonly streams: Database.Statement;
  private readonly insert: Database.Statement;
  private readonly deleteKey: Database.Statement;
  private readonly page: Database.Statement;

  constructor(db: Database.Database) {
    this.streams = db
      .prepare(
        `SELECT DISTINCT stream FROM idem_events
         WHERE json_extract(data, '$."${ENVELOPE}".subject') = ? ORDER BY stream`,
      )
      .pluck();
    this.insert = db.prepare('INSERT INTO idem_shreds (subject, stream, shredded_at) VALUES (?, ?, ?)');
    this.deleteKey = db.prepare('DELETE FROM idem_subject_keys WHERE subject = ?');
    this.page = db.prepare(
      'SELECT seq, subject, stream, shredded_at AS shreddedAt FROM idem_shreds WHERE seq > ? ORDER BY seq LIMIT ?',
    );
  }

  /** Inside a write: records the subject's streams. */
  record(subject: string): void {
    const at = new Date().toISOString();
    for (const stream of this.streams.all(subject) as string[]) this.insert.run(subject, stream, at);
  }

  /** Inside a write: deletes the subject's key from the store's own table and records its streams. */
  deleteKeyAndRecord(subject: string): boolean {
    const deleted = this.deleteKey.run(subject).changes > 0;
    this.record(subject);
    return deleted;
  }

  after(afterSeq: number, limit: number): ShredRecord[] {
    return this.page.all(afterSeq, limit) as ShredRecord[];
  }
}
