/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-argument --
   reply bodies are untyped JSON on purpose: the assertions check them field by field. */
// What the dashboard reads besides the store routes: the lag history and the effect outbox, on a
// SQLite store and a SQLite target.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createServer, type IdemServer } from '../../src/server/createServer.js';
import {
  openSqliteStore,
  sqliteTarget,
  type SqliteEventStore,
  type SqliteTarget,
} from '../../src/sqlite/index.js';
import { createConsumer } from '../../src/consumer/index.js';
import { randomConsumer, randomStream, tempDir, until, type TempDir } from '../support/index.js';
import { injectRequester, type Requester } from './requester.js';

describe('console routes', () => {
  let dir: TempDir;
  let store: SqliteEventStore;
  let target: SqliteTarget;
  let server: IdemServer;
  let request: Requester;

  before(async () => {
    dir = tempDir();
    store = await openSqliteStore({ path: dir.file('events.db') });
    target = sqliteTarget(dir.file('target.db'));
    server = await createServer({ store, lagSampleMs: 100, effectsTarget: target });
    request = injectRequester(server.app);
  });

  after(async () => {
    await server.close();
    await target.close();
    await store.close();
    await dir.cleanup();
  });

  it('samples every consumer lag in memory and answers it per consumer', async () => {
    const name = randomConsumer('lagging');
    const stream = randomStream('lag');
    await store.append(stream, [
      { type: 'a', data: 1 },
      { type: 'a', data: 2 },
    ]);
    const sub = await store.subscribe(name, { filter: { streamPrefixes: [stream] } });
    await sub.close();
    const r = await until(
      async () => {
        const r = await request('GET', `/v1/lag-history?consumer=${name}`);
        return r.json.consumers[0]?.samples.length >= 2 ? r : null;
      },
      { timeoutMs: 10_000, message: 'two samples of the consumer' },
    );
    assert.equal(r.json.intervalMs, 100);
    const samples = r.json.consumers[0].samples as [number, number][];
    const [time, lag] = samples[samples.length - 1]!;
    assert.equal(lag, 2);
    assert.ok(Number.isInteger(time));
    const all = await request('GET', '/v1/lag-history');
    const names = (all.json.consumers as { name: string }[]).map((c) => c.name);
    assert.ok(names.includes(name));
    assert.equal((await request('GET', '/v1/lag-history?consumer=no%20such')).status, 400);
    assert.equal((await request('GET', '/v1/lag-history?x=1')).status, 400);
  });

  it('lists the effect outbox and makes a failed effect pending again', async () => {
    const stream = randomStream('fx');
    await store.append(stream, [{ type: 'order.placed', data: { n: 1 } }]);
    const consumer = createConsumer({
      name: randomConsumer('fx'),
      source: store,
      target,
      filter: { streamPrefixes: [stream] },
      handle: async (_e, ctx) => {
        await ctx.effect('notify', { n: 1 });
      },
      effects: {
        liveFrom: 'start',
        handlers: {
          notify: () => {
            throw new Error('mail server down');
          },
        },
        dispatcher: { retry: { attempts: 1 }, pollIntervalMs: 20 },
      },
    });
    await consumer.start();
    try {
      const failed = await until(
        async () => {
          const r = await request('GET', '/v1/effects?status=failed');
          return r.json.effects.length > 0 ? r : null;
        },
        { timeoutMs: 15_000, message: 'the effect fails' },
      );
      assert.equal(failed.json.counts.failed, 1);
      assert.match(failed.json.effects[0].lastError, /mail server down/);
      await consumer.stop();
      const id = failed.json.effects[0].idempotencyKey as string;
      const retried = await request('POST', '/v1/effects/retry', { body: { id } });
      assert.deepEqual(retried.json, { retried: 1 });
      const pending = await request('GET', '/v1/effects?status=pending');
      assert.equal(pending.json.effects[0].idempotencyKey, id);
      assert.equal((await request('POST', '/v1/effects/retry', { body: { id } })).status, 404);
      assert.equal((await request('GET', '/v1/effects?status=lost')).status, 400);
      assert.equal((await request('POST', '/v1/effects/retry', { body: { all: true } })).status, 400);
    } finally {
      await consumer.stop();
    }
  });

  it('answers not_found for the outbox when the server has no target', async () => {
    const bare = await createServer({ store });
    try {
      const r = await injectRequester(bare.app)('GET', '/v1/effects');
      assert.equal(r.status, 404);
      assert.equal(r.json.error.details.what, 'effects target');
    } finally {
      await bare.close();
    }
  });
});
