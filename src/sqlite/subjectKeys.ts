import { randomBytes } from 'node:crypto';
import type Database from 'better-sqlite3';
import type { KeyProvider } from '../core/encryption.js';

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
