import assert from 'node:assert/strict';
import { it } from 'node:test';
import pgDriver from 'pg';
import { filterSql, positionRange } from '../../src/postgres/eventRows.js';
import { streamPartition } from '../../src/core/streamHash.js';
import { pgTestContext } from './pgFixtures.js';

const pg = await pgTestContext();

it(
  'a partition read goes through the partition index, not the primary key filtered',
  { skip: pg.skip },
  async () => {
    const store = await pg.openStore();
    const client = new pgDriver.Client({ connectionString: pg.db.connectionString });
    await client.connect();
    try {
      for (let c = 0; c < 200; c++) {
        await store.append(
          `acct-${c % 40}`,
          Array.from({ length: 10 }, (_, j) => ({ type: 'amount.added', data: { amount: j } })),
        );
      }
      const filter = { partition: { count: 4, index: 1 } };
      // The store's read (which creates the partition index on first use): the partition's events in order.
      const page = await store.scanPage(100, filter, 50, 1_000);
      assert.equal(page.events.length, 50);
      assert.ok(page.events.every((e) => streamPartition(e.stream, 4) === 1 && e.position > 100));
      assert.deepEqual(
        page.events.map((e) => e.position),
        [...page.events.map((e) => e.position)].sort((a, b) => a - b),
      );
      // The plan of the same condition, with the scans PostgreSQL could take instead of an index ruled out.
      await client.query(`ANALYZE ${store.schema}.events`);
      await client.query('SET enable_seqscan = off');
      await client.query('SET enable_bitmapscan = off');
      const where = `${positionRange(filter, '$1', '$1 + 1000')} AND ${filterSql(filter, 2).where}`;
      const plan = await client.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN SELECT position FROM ${store.schema}.events WHERE ${where} ORDER BY position LIMIT 50`,
        [100],
      );
      const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
      assert.match(text, /Index Scan using events_partition_4 on events/, text);
      assert.doesNotMatch(text, /events_pkey|Sort/, text);
    } finally {
      await client.end();
      await store.close();
    }
  },
);

it(
  'the first partition read gathers the statistics its plan needs: the index in order, no sort',
  { skip: pg.skip },
  async () => {
    const store = await pg.openStore();
    const client = new pgDriver.Client({ connectionString: pg.db.connectionString });
    await client.connect();
    try {
      for (let c = 0; c < 200; c++) {
        await store.append(
          `acct-${c % 40}`,
          Array.from({ length: 10 }, (_, j) => ({ type: 'amount.added', data: { amount: j } })),
        );
      }
      const filter = { partition: { count: 4, index: 2 } };
      await store.scanPage(0, filter, 50, 1_000);
      const stats = await client.query('SELECT 1 FROM pg_stats WHERE schemaname = $1 AND tablename = $2', [
        store.schema,
        'events_partition_4',
      ]);
      assert.equal(stats.rowCount, 1);
      // The plan PostgreSQL picks by itself (no scan type ruled out) for a page of a catch-up: a few of
      // the window's events.
      const where = `${positionRange(filter, '$1', '$1 + 1000')} AND ${filterSql(filter, 2).where}`;
      const plan = await client.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN SELECT position FROM ${store.schema}.events WHERE ${where} ORDER BY position LIMIT 20`,
        [100],
      );
      const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
      assert.match(text, /Index Scan using events_partition_4 on events/, text);
      assert.doesNotMatch(text, /Bitmap|Sort/, text);
    } finally {
      await client.end();
      await store.close();
    }
  },
);
