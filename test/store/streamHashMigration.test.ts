import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import { streamHash } from '../../src/core/streamHash.js';
import { runPgMigrations } from '../../src/postgres/migrations.js';
import { openPostgresStore, STORE_MIGRATIONS as PG_MIGRATIONS } from '../../src/postgres/postgresStore.js';
import { openDatabase } from '../../src/sqlite/connection.js';
import { runMigrations, STORE_MIGRATIONS } from '../../src/sqlite/migrations.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { pgTestContext } from '../postgres/pgFixtures.js';
import { randomIdentifier } from '../support/names.js';
import { tempDir } from '../support/index.js';

const pgContext = await pgTestContext();
const STREAMS = ['invoice-1', 'café-1', '発注-7', 'cart-😀', 'order-42'];

describe('stream hash migration', () => {
  it('SQLite: a store made before the stream hash gets it for every stored event, and partitions read them', async () => {
    const dir = tempDir();
    try {
      const path = dir.file('old.db');
      const db = openDatabase(path, { durability: 'full', busyTimeoutMs: 1000 });
      runMigrations(
        db,
        STORE_MIGRATIONS.filter((m) => m.version <= 2),
      );
      const insert = db.prepare(
        `INSERT INTO idem_events (position, id, stream, version, type, data, metadata, recorded_at)
         VALUES (?, ?, ?, 1, 't', '{}', '{}', '2026-01-01T00:00:00.000Z')`,
      );
      STREAMS.forEach((s, i) => insert.run(i + 1, `00000000-0000-4000-8000-00000000000${i}`, s));
      db.close();
      const store = await openSqliteStore({ path });
      try {
        const rows = store.db
          .prepare('SELECT stream, stream_hash FROM idem_events ORDER BY position')
          .all() as {
          stream: string;
          stream_hash: number;
        }[];
        assert.deepEqual(
          rows.map((r) => r.stream_hash),
          STREAMS.map(streamHash),
        );
        await store.append('order-43', [{ type: 't', data: {} }]);
        const last = store.db
          .prepare('SELECT stream_hash FROM idem_events WHERE stream = ?')
          .pluck()
          .get('order-43');
        assert.equal(last, streamHash('order-43'));
      } finally {
        await store.close();
      }
    } finally {
      await dir.cleanup();
    }
  });

  it(
    'PostgreSQL: a schema made before the stream hash gets it for every stored event',
    { skip: pgContext.skip },
    async () => {
      const pool = new pg.Pool({ connectionString: pgContext.db.connectionString, max: 2 });
      const schema = randomIdentifier('s');
      try {
        await runPgMigrations(
          { pool, schema },
          PG_MIGRATIONS.filter((m) => m.version <= 3),
        );
        for (const [i, s] of STREAMS.entries()) {
          await pool.query(
            `INSERT INTO ${schema}.events (position, id, stream, version, type, data, metadata, recorded_at)
           VALUES ($1, $2, $3, 1, 't', '{}', '{}', now())`,
            [i + 1, `00000000-0000-4000-8000-00000000000${i}`, s],
          );
        }
        await pool.query(`UPDATE ${schema}.head SET position = $1`, [STREAMS.length]);
        const store = await openPostgresStore({ pool, schema });
        try {
          // New events get it from the append functions: an append alone of one event and of
          // several (append_one), and appends grouped in one call (append_batch).
          await store.append('order-43', [{ type: 't', data: {} }]);
          await store.append('ördér-44', [
            { type: 't', data: {} },
            { type: 't', data: {} },
          ]);
          await Promise.all([
            store.append('order-45', [{ type: 't', data: {} }]),
            store.append('order-43', [{ type: 't', data: {} }]),
          ]);
          const r = await pool.query<{ stream: string; stream_hash: string }>(
            `SELECT stream, stream_hash FROM ${schema}.events ORDER BY position`,
          );
          const appended = ['order-43', 'ördér-44', 'ördér-44', 'order-45', 'order-43'];
          assert.deepEqual(
            r.rows.map((row) => [row.stream, Number(row.stream_hash)]),
            [...STREAMS, ...appended].map((s) => [s, streamHash(s)]),
          );
        } finally {
          await store.close();
        }
      } finally {
        await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await pool.end();
      }
    },
  );
});
