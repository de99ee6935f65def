import { randomBytes } from 'node:crypto';
import type { Pool } from 'pg';
import type { KeyProvider } from '../core/encryption.js';
import { withReconnect, type RetryOptions } from './connectionFaults.js';
import type { PostgresMigration } from './migrations.js';

/** Store migration 5: one AES-256 key per subject for `encrypt`; `store.shred` deletes the row. */
export const SUBJECT_KEYS_MIGRATION: PostgresMigration = {
  version: 6,
  name: 'subject keys',
  sql: (s) => `
    CREATE TABLE ${s}.subject_keys (
      subject    text        PRIMARY KEY,
      key        bytea       NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    );
  `,
};

/** The PostgreSQL store's own subject keys (table `subject_keys` in the store's schema). */
export class PostgresSubjectKeys implements KeyProvider {
  constructor(
    private readonly pool: Pool,
    /** The quoted schema. */
    private readonly s: string,
    private readonly retry: RetryOptions = {},
  ) {}

  async keys(subjects: readonly string[]): Promise<Map<string, Buffer>> {
    const r = await withReconnect(
      () =>
        this.pool.query<{ subject: string; key: Buffer }>(
          `SELECT subject, key FROM ${this.s}.subject_keys WHERE subject = ANY($1::text[])`,
          [subjects],
        ),
      this.retry,
    );
    return new Map(r.rows.map((row) => [row.subject, row.key]));
  }

  async create(subject: string): Promise<Buffer> {
    const fresh = randomBytes(32);
    // Two appends may make a subject's key at once: the first one stored wins (and a retry is harmless).
    const r = await withReconnect(
      () =>
        this.pool.query<{ key: Buffer }>(
          `WITH ins AS (
             INSERT INTO ${this.s}.subject_keys (subject, key) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING key
           )
           SELECT key FROM ins UNION ALL SELECT key FROM ${this.s}.subject_keys WHERE subject = $1 LIMIT 1`,
          [subject, fresh],
        ),
      this.retry,
    );
    return r.rows[0]!.key;
  }

  async delete(subject: string): Promise<boolean> {
    const r = await withReconnect(
      () => this.pool.query(`DELETE FROM ${this.s}.subject_keys WHERE subject = $1`, [subject]),
      this.retry,
    );
    return (r.rowCount ?? 0) > 0;
  }
}
