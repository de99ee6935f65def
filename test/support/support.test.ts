import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import pg from 'pg';
import { bySpeed } from './fast.js';
import { createTempDatabase, createTempSchema } from './postgres.js';
import { randomConsumer, randomStream } from './names.js';
import { requireOrSkip, tcpReachable } from './services.js';
import { tempDir } from './tempDir.js';
import { until } from './until.js';

describe('test support helpers', () => {
  it('until resolves with the first truthy value', async () => {
    let n = 0;
    const v = await until(() => (++n >= 3 ? n : 0), { timeoutMs: 1000 });
    assert.equal(v, 3);
  });

  it('until rejects naming what it waited for', async () => {
    await assert.rejects(
      until(() => false, { timeoutMs: 30, message: 'the moon' }),
      /waiting for the moon/,
    );
  });

  it('tempDir creates an empty directory and removes it', async () => {
    const dir = tempDir();
    writeFileSync(dir.file('x'), 'x');
    assert.ok(existsSync(dir.file('x')));
    await dir.cleanup();
    await dir.cleanup();
    assert.equal(existsSync(dir.path), process.env.IDEM_KEEP_TEST_DATA === '1');
  });

  it('random names are distinct and valid', () => {
    assert.notEqual(randomStream(), randomStream());
    assert.match(randomStream('invoice'), /^invoice-[0-9a-f]{8}$/);
    assert.match(randomConsumer(), /^[A-Za-z0-9_.:-]+$/);
  });

  it('tcpReachable is false for a closed port', async () => {
    assert.equal(await tcpReachable('127.0.0.1', 1, 500), false);
  });
});

const pgSkip = await requireOrSkip('postgres');

describe('postgres test databases', { skip: pgSkip }, () => {
  it('createTempDatabase creates a usable database and drops it', async () => {
    const db = await createTempDatabase();
    try {
      const client = new pg.Client({ connectionString: db.connectionString });
      await client.connect();
      try {
        const r = await client.query<{ d: string }>('select current_database() as d');
        assert.equal(r.rows[0]?.d, db.name);
      } finally {
        await client.end();
      }
    } finally {
      await db.drop();
    }
    if (process.env.IDEM_KEEP_TEST_DATA !== '1') {
      const client = new pg.Client({
        connectionString: process.env.IDEM_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
      });
      await client.connect();
      try {
        const r = await client.query('select 1 from pg_database where datname = $1', [db.name]);
        assert.equal(r.rowCount, 0);
      } finally {
        await client.end();
      }
    }
  });

  it('drop right after a pool ended terminates none of its connections', async () => {
    // pool.end() resolves before its connections have closed. A forced drop at that moment used to
    // terminate them, and the pool's error listener, still on the client, threw: an uncaught
    // exception that failed whichever test file was ending (seen in a full run on Node 22). Here
    // the pool records such errors instead, and every client must close without one. Ten databases
    // (three in the inner loop: each costs the server a copy of its template).
    const rounds = bySpeed(10, 3);
    const errors: Error[] = [];
    let removed = 0;
    for (let i = 0; i < rounds; i++) {
      const db = await createTempDatabase();
      const pool = new pg.Pool({ connectionString: db.connectionString, max: 4 });
      pool.on('error', (err) => errors.push(err));
      pool.on('remove', () => removed++);
      await Promise.all([1, 2, 3, 4].map(() => pool.query('select pg_sleep(0.01)')));
      await pool.end();
      await db.drop();
    }
    await until(() => removed === rounds * 4, { message: 'every pooled client to close' });
    assert.deepEqual(
      errors.map((e) => e.message),
      [],
    );
  });

  it('createTempSchema creates and drops a schema', async () => {
    const s = await createTempSchema();
    const client = new pg.Client({ connectionString: s.connectionString });
    await client.connect();
    try {
      await client.query(`create table "${s.schema}".t (x int)`);
      await s.drop();
      const r = await client.query('select 1 from information_schema.schemata where schema_name = $1', [
        s.schema,
      ]);
      assert.equal(r.rowCount, process.env.IDEM_KEEP_TEST_DATA === '1' ? 1 : 0);
    } finally {
      await client.end();
      await s.drop();
    }
  });
});

const natsSkip = await requireOrSkip('nats');

describe('nats availability', { skip: natsSkip }, () => {
  it('reports the NATS port reachable', async () => {
    assert.equal(await requireOrSkip('nats'), false);
  });
});
