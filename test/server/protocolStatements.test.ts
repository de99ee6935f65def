// Statements docs/protocol.md makes to client writers, checked as a client sees them: over a real port.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { randomCategory, randomConsumer, randomStream } from '../support/names.js';
import { startTestServer, type ServerFixture } from './serverFixture.js';
import { errorCode, WsPeer, type Msg } from './wsPeer.js';

async function withServer(fn: (f: ServerFixture) => Promise<void>): Promise<void> {
  const f = await startTestServer();
  try {
    await fn(f);
  } finally {
    await f.cleanup();
  }
}

interface Json {
  status: number;
  body: Record<string, unknown>;
}

async function call(url: string, method: string, path: string, body?: unknown): Promise<Json> {
  const res = await fetch(url + path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const appendPath = (stream: string): string => `/v1/streams/${encodeURIComponent(stream)}/events`;
const details = (m: Record<string, unknown>): Record<string, unknown> =>
  (m.error as { details: Record<string, unknown> }).details;
const isType = (type: string) => (m: Msg) => m.type === type;

describe('docs/protocol.md statements, over a real port', () => {
  it('appends: ids come back lower-cased; a retry with a now-stale expectedVersion is a duplicate; metadata null is {}', () =>
    withServer(async ({ url }) => {
      const stream = randomStream();
      const id = '0190F5C2-8E7A-7B4C-9D2E-3F1A2B3C4D5E';
      const body = { events: [{ id, type: 'a', data: 1, metadata: null }], expectedVersion: 0 };
      const first = await call(url, 'POST', appendPath(stream), body);
      assert.equal(first.status, 201);
      assert.deepEqual(first.body.ids, [id.toLowerCase()]);
      // The stream is now at version 1, so expectedVersion 0 is stale: the same ids make it a duplicate.
      const retry = await call(url, 'POST', appendPath(stream), body);
      assert.deepEqual([retry.status, retry.body.duplicate, retry.body.version], [200, true, 1]);
      // New ids with the stale version: a conflict, with the details the document names.
      const stale = await call(url, 'POST', appendPath(stream), {
        events: [{ type: 'a', data: 2 }],
        expectedVersion: 0,
      });
      assert.equal(stale.status, 409);
      assert.deepEqual(details(stale.body), { stream, expected: 0, actual: 1 });
      const read = await call(url, 'GET', appendPath(stream));
      const [event] = read.body.events as { id: string; metadata: unknown }[];
      assert.deepEqual([event!.id, event!.metadata], [id.toLowerCase(), {}]);
      // The id in another stream: idempotency_conflict naming both streams.
      const other = randomStream();
      const moved = await call(url, 'POST', appendPath(other), { events: [{ id, type: 'a', data: 1 }] });
      assert.equal(moved.status, 409);
      assert.deepEqual(details(moved.body), { id: id.toLowerCase(), stream: other, existingStream: stream });
    }));

  it('subscribe: the filter is repeated on every subscribe and compared as a set; from a position is exclusive', () =>
    withServer(async ({ url, store }) => {
      const cat = randomCategory();
      await store.append(
        `${cat}-1`,
        [1, 2, 3, 4].map((n) => ({ type: 'a', data: n })),
      );
      const name = randomConsumer();
      const peer = await WsPeer.open(url);
      try {
        peer.send({
          type: 'subscribe',
          sub: 's1',
          consumer: name,
          filter: { categories: [cat], types: ['b', 'a'] },
          from: 2,
          req: 1,
        });
        await peer.waitFor((m) => m.type === 'caught_up' && m.sub === 's1', 'caught_up');
        assert.deepEqual(
          peer.events('s1').map((e) => e.position),
          [3, 4],
          'from: 2 starts after position 2',
        );
        peer.send({ type: 'unsubscribe', sub: 's1', req: 2 });
        await peer.reply(2);

        peer.send({ type: 'subscribe', sub: 's2', consumer: name, req: 3 });
        const omitted = await peer.reply(3);
        assert.equal(errorCode(omitted), 'consumer_identity_conflict');
        assert.deepEqual(details(omitted), {
          consumer: name,
          existingFilter: { types: ['a', 'b'], categories: [cat] },
          requestedFilter: {},
        });

        peer.send({
          type: 'subscribe',
          sub: 's3',
          consumer: name,
          filter: { types: ['a', 'b', 'a'], categories: [cat] },
          from: 'end',
          req: 4,
        });
        const again = await peer.waitFor((m) => m.req === 4, 'the answer to request 4');
        // `from` applies only to a new consumer: this one resumes from its cursor, which `from: 2` set.
        assert.deepEqual([again.type, again.position], ['subscribed', 2]);
      } finally {
        await peer.close();
      }
    }));

  it('ConsumerInfo: idle while owned and caught up, the default owner text, consumer_busy details', () =>
    withServer(async ({ url }) => {
      const name = randomConsumer();
      const peer = await WsPeer.open(url);
      const rival = await WsPeer.open(url);
      try {
        peer.send({ type: 'subscribe', sub: 's', consumer: name, req: 1 });
        await peer.waitFor(isType('caught_up'), 'caught_up');
        const info = await call(url, 'GET', `/v1/consumers/${name}`);
        // The server sees this client's local address and port.
        const local = (peer.socket as unknown as { _socket: { localAddress: string; localPort: number } })
          ._socket;
        assert.equal(info.body.status, 'idle');
        assert.equal(info.body.owner, `${local.localAddress}:${local.localPort} (anonymous)`);
        rival.send({ type: 'subscribe', sub: 's', consumer: name, req: 1 });
        const busy = await rival.reply(1);
        assert.equal(errorCode(busy), 'consumer_busy');
        assert.deepEqual(details(busy), {
          consumer: name,
          owner: info.body.owner,
          leaseExpiresAt: details(busy).leaseExpiresAt,
        });
        assert.match(String(details(busy).leaseExpiresAt), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      } finally {
        await peer.close();
        await rival.close();
      }
    }));
});
