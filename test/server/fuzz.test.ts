// Fuzz: thousands of random malformed requests; none may cause a 5xx, stop the server, or change the store.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { RecordedEvent } from '../../src/core/event.js';
import type { EventStore } from '../../src/core/eventStore.js';
import { createServer } from '../../src/server/createServer.js';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { tempDir } from '../support/tempDir.js';
import { FUZZ_CONSUMER, malformedRequest, type FuzzRequest } from './malformedRequests.js';
import { startTestServer } from './serverFixture.js';

type Send = (r: FuzzRequest) => Promise<{ status: number; body: string }>;

const SEED = Number(process.env.IDEM_FUZZ_SEED ?? Date.now() % 2 ** 31);

async function snapshot(store: EventStore) {
  const events: RecordedEvent[] = [];
  for await (const e of store.readAll()) events.push(e);
  return { head: await store.headPosition(), events };
}

async function fuzz(send: Send, numRuns: number): Promise<{ statuses: Map<number, number> }> {
  const statuses = new Map<number, number>();
  await fc.assert(
    fc.asyncProperty(malformedRequest, async (req) => {
      const res = await send(req);
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      assert.ok(
        res.status < 500,
        `${req.method} ${req.url.slice(0, 200)} -> ${res.status} ${res.body.slice(0, 300)}`,
      );
      if (res.status >= 400) {
        const body = JSON.parse(res.body) as { error?: { code?: unknown; message?: unknown } };
        assert.equal(typeof body.error?.code, 'string', `error body: ${res.body.slice(0, 300)}`);
      }
      // POSTs are all defective: none may succeed.
      if (req.method === 'POST')
        assert.ok(res.status >= 400, `${req.method} ${req.url} was accepted: ${res.body.slice(0, 300)}`);
    }),
    { numRuns, seed: SEED, endOnFailure: true },
  );
  return { statuses };
}

async function seed(store: EventStore) {
  await store.append('invoice-1', [{ type: 'invoice.issued', data: { amount: 10, note: 'é💥' } }]);
  await store.append('fuzz-2', [
    { type: 'x', data: [1, 2, 3] },
    { type: 'y', data: null },
  ]);
}

describe(`fuzz: malformed requests (seed ${SEED}; rerun with IDEM_FUZZ_SEED=${SEED})`, () => {
  it('5,000 malformed requests in-process: no 5xx, nothing written, server still serving', async () => {
    const dir = tempDir();
    const store = await openSqliteStore({ path: dir.file('events.db'), durability: 'normal' });
    // A small body limit, so that some of the huge inputs are refused as too large (413).
    const server = await createServer({ store, limits: { maxBodyBytes: 64 * 1024 } });
    try {
      await seed(store);
      await (await store.subscribe(FUZZ_CONSUMER, { from: 'start' })).close();
      const before = await snapshot(store);
      const cursor = (await store.consumers.get(FUZZ_CONSUMER)).position;
      const { statuses } = await fuzz(async (r) => {
        const res = await server.app.inject({
          method: r.method as 'GET',
          url: r.url,
          headers: r.headers,
          ...(r.payload !== undefined ? { payload: r.payload } : {}),
        });
        return { status: res.statusCode, body: res.body };
      }, 5000);
      console.log(`# statuses: ${JSON.stringify(Object.fromEntries([...statuses].sort()))}`);
      assert.deepEqual(await snapshot(store), before, 'the store is unchanged (head and content)');
      assert.equal((await store.consumers.get(FUZZ_CONSUMER)).position, cursor);
      assert.deepEqual(
        (await store.consumers.list()).map((c) => c.name),
        [FUZZ_CONSUMER],
      );
      const health = await server.app.inject({ method: 'GET', url: '/health' });
      assert.equal(health.statusCode, 200);
      const ok = await server.app.inject({
        method: 'POST',
        url: '/v1/streams/after-1/events',
        payload: { events: [{ type: 'ok', data: 1 }] },
      });
      assert.equal(ok.statusCode, 201, 'a valid append still works');
    } finally {
      await server.close();
      await store.close();
      await dir.cleanup();
    }
  });

  it('300 malformed requests over a real port: no 5xx, nothing written, server still serving', async () => {
    const f = await startTestServer();
    try {
      await seed(f.store);
      const before = await snapshot(f.store);
      await fuzz(async (r) => {
        const res = await fetch(f.url + r.url, {
          method: r.method,
          headers: r.headers,
          body: r.payload ?? null,
        });
        return { status: res.status, body: await res.text() };
      }, 300);
      assert.deepEqual(await snapshot(f.store), before, 'the store is unchanged (head and content)');
      const health = await fetch(`${f.url}/health`);
      assert.equal(health.status, 200);
    } finally {
      await f.cleanup();
    }
  });
});
