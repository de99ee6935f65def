import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type Database from 'better-sqlite3';
import { connect } from '../../src/client/connect.js';
import { createConsumer } from '../../src/consumer/consumer.js';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { startServer } from '../../src/server/startServer.js';
import { randomConsumer, randomStream } from '../support/names.js';
import { until } from '../support/until.js';
import { faultySource } from './support/faults.js';
import { makeSqliteFixture } from './support/targetFixture.js';

describe('consumer over a remote source (idem server, HTTP + WebSocket)', () => {
  it('handles every event once, also when the ack after a commit is lost', async () => {
    const store = createMemoryStore();
    const server = await startServer({ store, port: 0 });
    const remote = connect(server.url);
    const fx = await makeSqliteFixture();
    const name = randomConsumer('remote');
    const c = createConsumer<Database.Database>({
      name,
      source: faultySource(remote, { failAcks: 1 }),
      target: fx.target,
      batch: { size: 4 },
      reconnect: { initialDelayMs: 5, maxDelayMs: 20 },
      handle: (e, ctx) => fx.add(ctx.tx, 'out', e.stream, (e.data as { amount: number }).amount),
    });
    try {
      await fx.createTable('out');
      const s = randomStream('invoice');
      let want = 0;
      for (let i = 1; i <= 10; i++) {
        await remote.append(s, [{ type: 'amount.added', data: { amount: i } }]);
        want += i;
      }
      await c.start();
      await c.whenCaughtUp({ timeoutMs: 20_000 });
      for (let i = 11; i <= 15; i++) {
        await remote.append(s, [{ type: 'amount.added', data: { amount: i } }]);
        want += i;
      }
      await c.whenCaughtUp({ timeoutMs: 20_000 });
      assert.equal((await fx.totals('out')).get(s)?.total, want);
      assert.equal(await fx.target.ledgerSize(name), 15);
      const m = c.metrics();
      assert.equal(m.processed, 15);
      assert.ok(m.duplicates >= 1, 'the batch whose ack was lost came again and was skipped');
      assert.equal(m.reconnects, 1);
      assert.equal((await store.consumers.get(name)).position, 15);
    } finally {
      await c.stop();
      await remote.close();
      await server.close();
      await store.close();
      await fx.cleanup();
    }
  });

  it("a dead-lettered entity's later events already delivered for the next batch wait behind it", async () => {
    const store = createMemoryStore();
    const server = await startServer({ store, port: 0 });
    const remote = connect(server.url);
    const fx = await makeSqliteFixture();
    const name = randomConsumer('remote');
    const [bad, good] = [randomStream('invoice'), randomStream('invoice')];
    const applied: number[] = [];
    let broken = true;
    // Pages of 3 and batches of at most 4 events: the second page is delivered during the first batch.
    const c = createConsumer<Database.Database>({
      name,
      source: remote,
      target: fx.target,
      batch: { size: 3, catchUpSize: 4 },
      onError: { attempts: 1, then: 'dead-letter', outage: false },
      handle: (e, ctx) => {
        if (e.stream === bad && broken && e.version === 1) throw new Error('invoice 1 is malformed');
        if (e.stream === bad) applied.push(e.version);
        return fx.add(ctx.tx, 'out', e.stream, (e.data as { amount: number }).amount);
      },
    });
    try {
      await fx.createTable('out');
      // Positions: bad 1, good 1, bad 2 | good 2, bad 3, good 3.
      for (let i = 1; i <= 3; i++)
        for (const s of [bad, good]) await remote.append(s, [{ type: 'amount.added', data: { amount: i } }]);
      await c.start();
      await c.whenCaughtUp({ timeoutMs: 20_000 });
      assert.deepEqual(applied, [], 'nothing of the broken entity is applied behind its dead letter');
      assert.equal((await fx.totals('out')).get(good)?.total, 6);
      assert.deepEqual(
        (await store.deadLetters.list(name)).map((l) => l.event.version),
        [1, 2, 3],
      );
      broken = false;
      assert.equal(await store.deadLetters.retry(name, { stream: bad }), 3);
      await until(async () => (await store.deadLetters.list(name)).length === 0, {
        message: 'dead letters resolved',
      });
      assert.deepEqual(applied, [1, 2, 3]);
      assert.equal((await fx.totals('out')).get(bad)?.total, 6);
    } finally {
      await c.stop();
      await remote.close();
      await server.close();
      await store.close();
      await fx.cleanup();
    }
  });
});
