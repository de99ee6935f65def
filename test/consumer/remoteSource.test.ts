import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type Database from 'better-sqlite3';
import { connect } from '../../src/client/connect.js';
import type { RemoteEventStore } from '../../src/client/remoteStore.js';
import { createConsumer, type Consumer } from '../../src/consumer/consumer.js';
import type { ConsumerBaseOptions, Handler } from '../../src/consumer/options.js';
import { createMemoryStore, type MemoryEventStore } from '../../src/memory/memoryStore.js';
import { startServer } from '../../src/server/startServer.js';
import { randomConsumer, randomStream } from '../support/names.js';
import { until } from '../support/until.js';
import { faultySource } from './support/faults.js';
import { makeSqliteFixture, type TargetFixture } from './support/targetFixture.js';

/** What a test over a server needs; `consumer` makes one on the remote source into the fixture's table `out`. */
interface Remote {
  store: MemoryEventStore;
  remote: RemoteEventStore;
  fx: TargetFixture<Database.Database>;
  name: string;
  consumer: (
    options: Partial<Pick<ConsumerBaseOptions<Database.Database>, 'source' | 'batch' | 'onError'>> & {
      handle?: Handler<Database.Database>;
    },
  ) => Consumer;
}

/** A memory store behind a server on a free port, a client of it and a SQLite target; all closed after `fn`. */
async function withRemote(fn: (r: Remote) => Promise<void>): Promise<void> {
  const store = createMemoryStore();
  const server = await startServer({ store, port: 0 });
  const remote = connect(server.url);
  const fx = await makeSqliteFixture();
  const consumers: Consumer[] = [];
  const name = randomConsumer('remote');
  try {
    await fx.createTable('out');
    await fn({
      store,
      remote,
      fx,
      name,
      consumer: (options) => {
        const c = createConsumer<Database.Database>({
          name,
          source: remote,
          target: fx.target,
          reconnect: { initialDelayMs: 5, maxDelayMs: 20 },
          handle: (e, ctx) => fx.add(ctx.tx, 'out', e.stream, (e.data as { amount: number }).amount),
          ...options,
        });
        consumers.push(c);
        return c;
      },
    });
  } finally {
    for (const c of consumers) await c.stop();
    await remote.close();
    await server.close();
    await store.close();
    await fx.cleanup();
  }
}

describe('consumer over a remote source (idem server, HTTP + WebSocket)', () => {
  it('handles every event once, also when the ack after a commit is lost', () =>
    withRemote(async ({ store, remote, fx, name, consumer }) => {
      const c = consumer({ source: faultySource(remote, { failAcks: 1 }), batch: { size: 4 } });
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
    }));

  it("a dead-lettered entity's later events already delivered for the next batch wait behind it", () =>
    withRemote(async ({ store, remote, fx, name, consumer }) => {
      const [bad, good] = [randomStream('invoice'), randomStream('invoice')];
      const applied: number[] = [];
      let broken = true;
      // Pages of 3 and batches of at most 4 events: the second page is delivered during the first batch.
      const c = consumer({
        batch: { size: 3, catchUpSize: 4 },
        onError: { attempts: 1, then: 'dead-letter', outage: false },
        handle: (e, ctx) => {
          if (e.stream === bad && broken && e.version === 1) throw new Error('invoice 1 is malformed');
          if (e.stream === bad) applied.push(e.version);
          return fx.add(ctx.tx, 'out', e.stream, (e.data as { amount: number }).amount);
        },
      });
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
    }));
});
