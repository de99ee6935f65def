import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type Database from 'better-sqlite3';
import { connect } from '../../src/client/connect.js';
import { createConsumer } from '../../src/consumer/consumer.js';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { startServer } from '../../src/server/startServer.js';
import { randomConsumer, randomStream } from '../support/names.js';
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
});
