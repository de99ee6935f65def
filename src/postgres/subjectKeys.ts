import { randomBytes } from 'node:crypto';
import type { Pool } from 'pg';
import { ENVELOPE, type KeyProvider } from '../core/encryption.js';
import type { ShredRecord } from '../core/eventStore.js';
import { checkout } from './checkout.js';
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

/**
 * Store migration: the shred log, one row per stream in which `shred(subject)` found events sealed
 * with the subject's key, written with the key's deletion. Consumers follow it (`store.shreds`).
 */
export const SHRED_LOG_MIGRATION: PostgresMigration = {
  version: 10,
  name: 'shred log',
  sql: (s) => `
    CREATE TABLE ${s}.shreds (
      seq         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      subject     text        NOT NULL,
      stream      text        NOT NULL,
      shredded_at timestamptz NOT NULL DEFAULT now()
    );
  `,
};

/**
 * Records the streams of `subject`'s events in the shred log and, with `deleteOwnKey`, deletes its
 * key from the store's own table in the same transaction. The streams are found by a scan of the
 * events' stored envelopes (a shred is rare). Returns whether a key was deleted.
 */
export async function shredInStore(
  pool: Pool,
  s: string,
  subject: string,
  deleteOwnKey: boolean,
  retry: RetryOptions = {},
): Promise<boolean> {
  return withReconnect(async () => {
    const { client, release } = await checkout(pool);
    try {
      await client.query('BEGIN');
      let deleted = false;
      if (deleteOwnKey) {
        const r = await client.query(`DELETE FROM ${s}.subject_keys WHERE subject = $1`, [subject]);
        deleted = (r.rowCount ?? 0) > 0;
      }
      await client.query(
        `INSERT INTO ${s}.shreds (subject, stream)
         SELECT $1, stream FROM (
           SELECT DISTINCT stream FROM ${s}.events WHERE data -> '${ENVELOPE}' ->> 'subject' = $1
         ) t ORDER BY stream`,
        [subject],
      );
      await client.query('COMMIT');
      release();
      return deleted;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      release(err as Error);
      throw err;
    }
  }, retry);
}

/** The shred log after `afterSeq`, oldest first. */
export async function shredsAfter(
  pool: Pool,
  s: string,
  afterSeq: number,
  limit: number,
  retry: RetryOptions = {},
): Promise<ShredRecord[]> {
  const r = await withReconnect(
    () =>
      pool.query<{ seq: string; subject: string; stream: string; at: Date }>(
        `SELECT seq, subject, stream, shredded_at AS at FROM ${s}.shreds WHERE seq > $1 ORDER BY seq LIMIT $2`,
        [afterSeq, limit],
      ),
    retry,
  );
  return r.rows.map((row) => ({
    seq: Number(row.seq),
    subject: row.subject,
    stream: row.stream,
    shreddedAt: row.at.toISOString(),
  }));
}
