// Concurrent appends through connect(url) share requests (POST /v1/appends), and each still gets its
// own result or error, exactly as if it had been sent alone.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { appendBody } from '../../src/client/appendCoalescer.js';
import { connect } from '../../src/client/connect.js';
import { TooLargeError, WrongExpectedVersionError } from '../../src/core/errors.js';
import { resolveStoreLimits } from '../../src/core/limits.js';
import { prepareAppend } from '../../src/core/validation.js';
import { randomStream } from '../support/names.js';
import { withServer, type ServerFixture } from '../server/serverFixture.js';

/** Requests the server answered on `route`, whatever their status. */
async function requests(f: ServerFixture, route: string): Promise<number> {
  const { values } = await f.server.metrics.httpRequests.get();
  return values.filter((v) => v.labels.route === route).reduce((n, v) => n + v.value, 0);
}

const APPEND_ROUTE = '/v1/streams/:stream/events';

describe('remote store: concurrent appends over HTTP', () => {
  it('appends made together travel in one request, each with its own outcome', () =>
    withServer({ storeLimits: { maxEventBytes: 1000 } }, async (f) => {
      const remote = connect(f.url, { appendSocket: false });
      try {
        const [a, b] = [randomStream(), randomStream()];
        const id = randomUUID();
        await remote.append(a, [{ id, type: 'a', data: 1 }]);
        const before = await requests(f, '/v1/appends');
        const outcomes = await Promise.allSettled([
          // A retry of the append above.
          remote.append(a, [{ id, type: 'a', data: 1 }]),
          // Two appends expecting the same version of one stream: one of them is written.
          remote.append(b, [{ type: 'b', data: 1 }], { expectedVersion: 0 }),
          remote.append(b, [{ type: 'b', data: 2 }], { expectedVersion: 0 }),
          remote.append(a, [{ type: 'a', data: 'x'.repeat(2000) }]),
          ...Array.from({ length: 16 }, (_, i) => remote.append(randomStream(), [{ type: 'c', data: i }])),
        ]);
        assert.equal((await requests(f, '/v1/appends')) - before, 1, 'one request for all twenty');
        const [retry, b1, b2, big, ...rest] = outcomes;
        assert.equal(retry.status === 'fulfilled' && retry.value.duplicate, true);
        const bs = [b1, b2];
        assert.equal(bs.filter((o) => o.status === 'fulfilled').length, 1);
        const lost = bs.find((o) => o.status === 'rejected');
        assert.ok(lost?.reason instanceof WrongExpectedVersionError, String(lost?.reason));
        assert.equal(lost.reason.details.actual, 1);
        assert.ok(big.status === 'rejected' && big.reason instanceof TooLargeError, big.status);
        assert.equal(big.reason.details.field, 'events[0]');
        assert.ok(rest.every((o) => o.status === 'fulfilled' && o.value.version === 1));
        assert.equal(await f.store.streamVersion(a), 1);
        assert.equal(await f.store.streamVersion(b), 1);
      } finally {
        await remote.close();
      }
    }));

  it('a lone append uses the single-append route', () =>
    withServer({}, async (f) => {
      const remote = connect(f.url, { appendSocket: false });
      try {
        const before = await requests(f, APPEND_ROUTE);
        const r = await remote.append(randomStream(), [{ type: 'a', data: 1 }]);
        assert.equal(r.version, 1);
        assert.equal((await requests(f, APPEND_ROUTE)) - before, 1);
        assert.equal(await requests(f, '/v1/appends'), 0);
      } finally {
        await remote.close();
      }
    }));

  it('appends that together exceed the server body limit are sent one by one', () =>
    withServer({ limits: { maxBodyBytes: 4000 } }, async (f) => {
      const remote = connect(f.url);
      try {
        const streams = Array.from({ length: 8 }, () => randomStream());
        const results = await Promise.all(
          streams.map((s) => remote.append(s, [{ type: 'a', data: 'x'.repeat(1000) }])),
        );
        assert.deepEqual(
          results.map((r) => r.version),
          streams.map(() => 1),
        );
        // Too large for one frame on the append socket, and refused as a whole over HTTP (413):
        // then each append went alone.
        assert.equal(await requests(f, '/v1/appends'), 1);
        assert.equal(await requests(f, APPEND_ROUTE), 8);
        for (const s of streams) assert.equal(await f.store.streamVersion(s), 1);
      } finally {
        await remote.close();
      }
    }));
});

describe('appendBody', () => {
  it('is the JSON of the append request, made from the prepared texts', () => {
    const events = prepareAppend(
      'orders-1',
      [
        { type: 'Placed "now"', data: { total: 1.5, note: 'é\u2028\u0000' } },
        { id: randomUUID(), type: 't', data: null, metadata: { schemaVersion: 2, by: 'x' } },
        { type: 't', data: [1, 'two', { three: true }] },
      ],
      resolveStoreLimits({}),
    );
    for (const expectedVersion of ['any', 'no_stream', 7] as const) {
      const body = appendBody(events, expectedVersion);
      assert.deepEqual(JSON.parse(body), {
        events: events.map((e) => ({ id: e.id, type: e.type, data: e.data, metadata: e.metadata })),
        expectedVersion,
      });
    }
  });
});
