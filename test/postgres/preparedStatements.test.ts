import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PostgresEventStore } from '../../src/postgres/index.js';
import { pgTestContext } from './pgFixtures.js';

const pg = await pgTestContext();

/** The names of the statements prepared on the store's only pooled connection. */
async function preparedNames(store: PostgresEventStore): Promise<string[]> {
  const r = await store.pool.query<{ name: string }>('SELECT name FROM pg_prepared_statements ORDER BY name');
  return r.rows.map((row) => row.name);
}

/** One append, one `readStream` and one `readAll`, each read to its end, and a subscription's first page. */
async function appendAndRead(store: PostgresEventStore): Promise<void> {
  await store.append('order-1', [{ type: 'order.placed', data: { total: 5 } }]);
  const streamed = [];
  for await (const e of store.readStream('order-1')) streamed.push(e.type);
  const all = [];
  for await (const e of store.readAll()) all.push(e.type);
  assert.deepEqual(streamed, ['order.placed']);
  assert.deepEqual(all, ['order.placed']);
  const page = await store.scanPage(0, {}, 10, 1000);
  assert.deepEqual(
    page.events.map((e) => e.type),
    ['order.placed'],
  );
}

describe('statements prepared on the pooled connections', { skip: pg.skip }, () => {
  it('are named for the hot paths by default: append, readStream, readAll and an unfiltered subscription page', async () => {
    const store = await pg.openStore({ poolSize: 1 });
    try {
      await appendAndRead(store);
      const names = await preparedNames(store);
      for (const what of ['append_one', 'read_stream', 'read_all', 'scan_page'])
        assert.ok(
          names.some((n) => n.startsWith(`idem_${what}_`)),
          `${what} is not among the prepared statements: ${names.join(', ')}`,
        );
    } finally {
      await store.close();
    }
  });

  it('are none with preparedStatements: false', async () => {
    const store = await pg.openStore({ poolSize: 1, preparedStatements: false });
    try {
      await appendAndRead(store);
      assert.deepEqual(
        (await preparedNames(store)).filter((n) => n.startsWith('idem_')),
        [],
      );
    } finally {
      await store.close();
    }
  });
});
