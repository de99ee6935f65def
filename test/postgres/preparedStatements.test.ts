import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SubscriptionMessage } from '../../src/core/subscription.js';
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

/**
 * A subscription that acks its first page, then stays until its lease was renewed once (the shortest
 * lease renews every third of a second).
 */
async function subscribeAckAndRenew(store: PostgresEventStore): Promise<void> {
  const sub = await store.subscribe('prepared_v1', { from: 'start', leaseTtlMs: 1000 });
  try {
    // Not `for await`: leaving that loop would close the subscription.
    const messages = sub[Symbol.asyncIterator]();
    let m: SubscriptionMessage | undefined;
    do m = (await messages.next()).value as SubscriptionMessage | undefined;
    while (m && m.kind !== 'events');
    assert.ok(m?.kind === 'events', 'the subscription ended before its first page');
    assert.deepEqual(
      m.events.map((e) => e.type),
      ['order.placed'],
    );
    await sub.ack(m.events[0]!.position);
    const lease = async () => (await store.consumers.get('prepared_v1')).leaseExpiresAt;
    const first = await lease();
    const deadline = Date.now() + 10_000;
    while ((await lease()) === first) {
      assert.ok(Date.now() < deadline, 'the lease was not renewed within 10 s');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    await sub.close();
  }
}

describe('statements prepared on the pooled connections', { skip: pg.skip }, () => {
  it("are named for the hot paths by default: appends, reads, a subscription's page, ack and lease renewal", async () => {
    const store = await pg.openStore({ poolSize: 1 });
    try {
      await appendAndRead(store);
      await subscribeAckAndRenew(store);
      // One event alone goes to append_event (above), several in one call to append_one.
      await store.append('order-2', [
        { type: 'order.placed', data: {} },
        { type: 'order.paid', data: {} },
      ]);
      const names = await preparedNames(store);
      for (const what of [
        'append_event',
        'append_one',
        'read_stream',
        'read_all',
        'scan_page',
        'ack',
        'renew',
      ])
        assert.ok(
          names.some((n) => n.startsWith(`idem_${what}_`)),
          `${what} is not among the prepared statements: ${names.join(', ')}`,
        );
    } finally {
      await store.close();
    }
  });

  it("name a filtered subscription page, and a filtered readAll, by its filter for a store's first 32 filters only", async () => {
    const store = await pg.openStore({ poolSize: 1 });
    const readAll = async (type: string) => {
      const types = [];
      for await (const e of store.readAll({ filter: { types: [type] } })) types.push(e.type);
      return types;
    };
    try {
      await store.append('order-1', [{ type: 'type-0', data: {} }]);
      for (let i = 0; i < 33; i++) {
        const page = await store.scanPage(0, { types: [`type-${i}`] }, 10, 1000);
        assert.equal(page.events.length, i === 0 ? 1 : 0);
        assert.deepEqual(await readAll(`type-${i}`), i === 0 ? ['type-0'] : []);
      }
      // Again: the same statements, no new ones.
      for (let i = 0; i < 33; i++) {
        await store.scanPage(0, { types: [`type-${i}`] }, 10, 1000);
        await readAll(`type-${i}`);
      }
      const names = await preparedNames(store);
      assert.equal(names.filter((n) => /^idem_scan_[0-9a-f]{12}_/.test(n)).length, 32);
      assert.equal(names.filter((n) => /^idem_read_[0-9a-f]{12}_/.test(n)).length, 32);
    } finally {
      await store.close();
    }
  });

  it("name the tail's scan for resting subscriptions by its shape (which lengths of prefix), for the first 32 shapes only", async () => {
    const store = await pg.openStore({ poolSize: 1 });
    try {
      await store.append('order-1', [{ type: 'order.placed', data: {} }]);
      // 33 shapes (prefixes of 1 to 33 characters), each asked twice with other prefixes of that length.
      for (const letter of ['o', 'x'])
        for (let length = 1; length <= 33; length++) {
          const prefix = letter.repeat(length);
          const answer = await store.firstStreamMatch(0, [prefix], []);
          assert.deepEqual(answer, { head: 1, first: prefix === 'o' ? 1 : null });
        }
      assert.deepEqual(await store.firstStreamMatch(0, ['x', 'or'], ['order']), { head: 1, first: 1 });
      const names = await preparedNames(store);
      assert.equal(names.filter((n) => /^idem_first_match_[0-9a-f]{12}_/.test(n)).length, 32);
    } finally {
      await store.close();
    }
  });

  it('are none with preparedStatements: false', async () => {
    const store = await pg.openStore({ poolSize: 1, preparedStatements: false });
    try {
      await appendAndRead(store);
      await subscribeAckAndRenew(store);
      await store.scanPage(0, { types: ['order.placed'] }, 10, 1000);
      assert.deepEqual(await store.firstStreamMatch(0, ['ord'], ['order']), { head: 1, first: 1 });
      for await (const e of store.readAll({ filter: { types: ['order.placed'] } }))
        assert.equal(e.type, 'order.placed');
      assert.deepEqual(
        (await preparedNames(store)).filter((n) => n.startsWith('idem_')),
        [],
      );
    } finally {
      await store.close();
    }
  });
});
