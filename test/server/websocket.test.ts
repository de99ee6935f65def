// The WebSocket subscription protocol over a real socket: delivery, acks, ownership, leases, fencing, limits.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventStore } from '../../src/core/eventStore.js';
import type { Subscription } from '../../src/core/subscription.js';
import { startServer, type RunningServer } from '../../src/server/startServer.js';
import { openSqliteStore, type SqliteEventStore } from '../../src/sqlite/sqliteStore.js';
import { randomCategory, randomConsumer } from '../support/names.js';
import { tempDir } from '../support/tempDir.js';
import { until } from '../support/until.js';
import { withServer } from './serverFixture.js';
import { errorCode, WsPeer, type Msg } from './wsPeer.js';

async function appendMany(store: EventStore, stream: string, n: number): Promise<void> {
  await store.append(
    stream,
    Array.from({ length: n }, (_, i) => ({ type: 'n', data: i })),
  );
}

const isType = (type: string, sub?: string) => (m: Msg) =>
  m.type === type && (sub === undefined || m.sub === sub);

describe('WebSocket /v1/subscribe', () => {
  it('delivers catch-up batches, caught_up and live events; acks move the cursor', () =>
    withServer({}, async ({ url, store }) => {
      const cat = randomCategory();
      const name = randomConsumer();
      await appendMany(store, `${cat}-1`, 5);
      const peer = await WsPeer.open(url);
      try {
        const hello = await peer.waitFor(isType('hello'), 'hello');
        assert.equal(hello.protocol, 1);
        peer.send({
          type: 'subscribe',
          sub: 'a',
          consumer: name,
          filter: { categories: [cat] },
          batchSize: 2,
          req: 1,
        });
        const subscribed = await peer.waitFor(isType('subscribed', 'a'), 'subscribed');
        assert.deepEqual([subscribed.req, subscribed.consumer, subscribed.position], [1, name, 0]);
        assert.ok(Number(subscribed.epoch) >= 1);
        const caught = await peer.waitFor(isType('caught_up', 'a'), 'caught_up');
        assert.deepEqual(
          peer.events('a').map((e) => e.position),
          [1, 2, 3, 4, 5],
        );
        assert.ok(
          peer.messages.filter(isType('events', 'a')).every((m) => (m.events as unknown[]).length <= 2),
          'batches of at most batchSize',
        );
        assert.equal(caught.position, 5);
        await appendMany(store, `${cat}-2`, 1);
        await until(() => peer.events('a').length === 6, { message: 'the live event' });
        peer.send({ type: 'ack', sub: 'a', position: 6, req: 2 });
        assert.equal((await peer.reply(2)).type, 'ok');
        assert.equal((await store.consumers.get(name)).position, 6);
        peer.send({ type: 'ack', sub: 'a', position: 99, req: 3 });
        const tooFar = await peer.reply(3);
        assert.equal(errorCode(tooFar), 'invalid_input');
        peer.send({ type: 'unsubscribe', sub: 'a', req: 4 });
        assert.equal((await peer.reply(4)).type, 'ok');
        assert.equal((await peer.waitFor(isType('closed', 'a'), 'closed')).reason, 'unsubscribed');
        assert.equal((await store.consumers.get(name)).status, 'stopped');
      } finally {
        await peer.close();
      }
    }));

  it('refuses a second owner with consumer_busy and a different filter with consumer_identity_conflict', () =>
    withServer({}, async ({ url }) => {
      const name = randomConsumer();
      const first = await WsPeer.open(url);
      const second = await WsPeer.open(url);
      try {
        first.send({ type: 'subscribe', sub: 's', consumer: name, filter: { types: ['a'] }, req: 1 });
        await first.waitFor(isType('subscribed'), 'subscribed');
        second.send({ type: 'subscribe', sub: 's', consumer: name, filter: { types: ['a'] }, req: 1 });
        const busy = await second.reply(1);
        assert.equal(errorCode(busy), 'consumer_busy');
        assert.equal(busy.sub, 's');
        second.send({ type: 'subscribe', sub: 't', consumer: name, filter: { types: ['b'] }, req: 2 });
        const conflict = await second.reply(2);
        assert.equal(errorCode(conflict), 'consumer_identity_conflict');
        assert.match((conflict.error as { message: string }).message, /_v2/);
      } finally {
        await first.close();
        await second.close();
      }
    }));

  it('a closed socket releases the lease at once: a standby takes over long before the TTL', () =>
    withServer({}, async ({ url, store }) => {
      const name = randomConsumer();
      const owner = await WsPeer.open(url);
      const standby = await WsPeer.open(url);
      try {
        owner.send({ type: 'subscribe', sub: 's', consumer: name, leaseTtlMs: 300_000, req: 1 });
        const first = await owner.waitFor(isType('subscribed'), 'owner subscribed');
        standby.send({
          type: 'subscribe',
          sub: 's',
          consumer: name,
          standby: true,
          leaseTtlMs: 300_000,
          req: 1,
        });
        assert.notEqual((await store.consumers.get(name)).owner, null);
        const started = Date.now();
        owner.terminate();
        const second = await standby.waitFor(isType('subscribed'), 'standby took over');
        assert.ok(Number(second.epoch) > Number(first.epoch), 'a takeover raises the epoch');
        assert.ok(Date.now() - started < 600_000);
        assert.equal((await store.consumers.get(name)).epoch, second.epoch);
      } finally {
        await standby.close();
      }
    }));

  it('a silent connection (no pongs, no messages) is dropped after silenceMs, releasing its lease', () =>
    withServer({ heartbeatMs: 50, silenceMs: 400 }, async ({ url, store }) => {
      const name = randomConsumer();
      const silent = await WsPeer.open(url, { autoPong: false });
      silent.send({ type: 'subscribe', sub: 's', consumer: name, leaseTtlMs: 300_000, req: 1 });
      await silent.waitFor(isType('subscribed'), 'subscribed');
      await silent.waitFor(isType('heartbeat'), 'a heartbeat');
      await until(() => silent.closeCode !== null, { message: 'the server to drop the silent socket' });
      await until(async () => (await store.consumers.get(name)).owner === null, {
        message: 'the lease released',
      });
      const next = await WsPeer.open(url);
      try {
        next.send({ type: 'subscribe', sub: 's', consumer: name, req: 1 });
        await next.waitFor(isType('subscribed'), 'a new owner');
      } finally {
        await next.close();
      }
    }));

  it('the silence timer runs from the last frame received, not from the heartbeat: dropped with no heartbeat due', () =>
    // A heartbeat (and ping) every ten minutes: the old per-heartbeat check would not run in this test.
    withServer({ heartbeatMs: 600_000, silenceMs: 300 }, async ({ url, store }) => {
      const name = randomConsumer();
      const silent = await WsPeer.open(url);
      silent.send({ type: 'subscribe', sub: 's', consumer: name, leaseTtlMs: 300_000, req: 1 });
      await silent.waitFor(isType('subscribed'), 'subscribed');
      await until(() => silent.closeCode !== null, { message: 'the server to drop the silent socket' });
      assert.equal(silent.messages.filter(isType('heartbeat')).length, 0, 'dropped before any heartbeat');
      await until(async () => (await store.consumers.get(name)).owner === null, {
        message: 'the lease released',
      });
    }));

  it('any frame from the client resets the silence timer: its own WebSocket pings keep the connection and the lease', () =>
    withServer({ heartbeatMs: 600_000, silenceMs: 200 }, async ({ url, store }) => {
      const name = randomConsumer();
      const peer = await WsPeer.open(url);
      let pongs = 0;
      peer.socket.on('pong', () => pongs++);
      const pinger = setInterval(() => peer.socket.ping(), 50);
      try {
        peer.send({ type: 'subscribe', sub: 's', consumer: name, leaseTtlMs: 1000, req: 1 });
        const subscribed = await peer.waitFor(isType('subscribed'), 'subscribed');
        // Sixty pongs at one ping per 50 ms span many silenceMs and several lease TTLs (the shortest, 1 s).
        await until(() => pongs >= 60, { message: 'sixty pongs' });
        assert.equal(peer.closeCode, null, 'the connection is still open');
        const info = await store.consumers.get(name);
        // Owned, nothing to process: `idle` (a live lease), under the same epoch.
        assert.deepEqual([info.status, info.epoch], ['idle', subscribed.epoch], 'the lease was renewed');
        peer.send({ type: 'ack', sub: 's', position: 0, req: 2 });
        assert.equal((await peer.reply(2)).type, 'ok');
      } finally {
        clearInterval(pinger);
        await peer.close();
      }
    }));

  it('a client that only answers the server pings keeps its lease across many TTLs and silenceMs', () =>
    withServer({ heartbeatMs: 50, silenceMs: 400 }, async ({ url, store }) => {
      const name = randomConsumer();
      const peer = await WsPeer.open(url);
      const rival = await WsPeer.open(url);
      try {
        peer.send({ type: 'subscribe', sub: 's', consumer: name, leaseTtlMs: 1000, req: 1 });
        const subscribed = await peer.waitFor(isType('subscribed'), 'subscribed');
        // Sixty heartbeats at one per 50 ms span several lease TTLs (the shortest, 1 s).
        await until(() => peer.messages.filter(isType('heartbeat')).length >= 60, {
          message: 'sixty heartbeats',
        });
        rival.send({ type: 'subscribe', sub: 's', consumer: name, req: 1 });
        assert.equal(errorCode(await rival.reply(1)), 'consumer_busy');
        assert.equal((await store.consumers.get(name)).epoch, subscribed.epoch);
        assert.equal(peer.closeCode, null);
      } finally {
        await peer.close();
        await rival.close();
      }
    }));

  it('a frame larger than maxMessageBytes closes the connection with 1009', () =>
    withServer({ limits: { maxMessageBytes: 1000 } }, async (f) => {
      const peer = await WsPeer.open(f.url);
      try {
        peer.send({ type: 'ping', req: 'x'.repeat(90) });
        await peer.waitFor((m) => m.type === 'pong', 'pong');
        peer.send({ type: 'ping', req: 'x'.repeat(2000) });
        await until(() => peer.closeCode !== null, { message: 'close' });
        assert.equal(peer.closeCode, 1009);
        assert.equal(peer.closeReason, 'message too big: at most 1000 bytes');
      } finally {
        await peer.close();
      }
    }));

  it('every reply names its request; a request without req is refused and changes nothing', () =>
    withServer({}, async ({ url, store }) => {
      const cat = randomCategory();
      const name = randomConsumer();
      await appendMany(store, `${cat}-1`, 3);
      const peer = await WsPeer.open(url);
      try {
        peer.send({
          type: 'subscribe',
          sub: 's',
          consumer: name,
          filter: { categories: [cat] },
          req: 'sub-1',
        });
        await peer.waitFor(isType('caught_up', 's'), 'caught_up');
        for (const request of [
          { type: 'ack', sub: 's', position: 3 },
          { type: 'ack', sub: 's', position: 99 },
          { type: 'park', sub: 's', position: 1, info: { reason: 'x' } },
          { type: 'fail', sub: 's', info: { error: { message: 'x' } } },
          { type: 'unsubscribe', sub: 's' },
          { type: 'subscribe', sub: 't', consumer: randomConsumer() },
        ]) {
          const before = peer.messages.length;
          peer.send(request);
          const refused = await peer.waitFor(isType('error'), `the refusal of ${request.type}`, before);
          assert.equal(errorCode(refused), 'invalid_input');
          assert.equal((refused.error as { details: { field: string } }).details.field, 'req');
          assert.ok(!('req' in refused) && !('sub' in refused), JSON.stringify(refused));
        }
        assert.equal((await store.consumers.get(name)).position, 0, 'nothing was acknowledged');
        // A failed request with req: an error with that req (and sub); the subscription carries on.
        peer.send({ type: 'ack', sub: 's', position: 99, req: 2 });
        const tooFar = await peer.reply(2);
        assert.deepEqual([tooFar.type, tooFar.sub, errorCode(tooFar)], ['error', 's', 'invalid_input']);
        peer.send({ type: 'ack', sub: 's', position: 3, req: 3 });
        assert.deepEqual(await peer.reply(3), { type: 'ok', req: 3, sub: 's' });
        await appendMany(store, `${cat}-2`, 1);
        await until(() => peer.events('s').length === 4, { message: 'delivery goes on' });
        assert.equal(peer.messages.filter(isType('closed')).length, 0);
        assert.equal(
          peer.messages.filter((m) => m.type === 'error' && m.sub !== undefined && m.req === undefined)
            .length,
          0,
          'no error with sub and without req: the subscription did not end',
        );
      } finally {
        await peer.close();
      }
    }));

  it("park's ok says through which position the stream's delivered events were parked behind it", () =>
    withServer({}, async ({ url, store }) => {
      const cat = randomCategory();
      const name = randomConsumer();
      // Positions: a 1, a 2, b 3, a 4.
      await appendMany(store, `${cat}-a`, 2);
      await appendMany(store, `${cat}-b`, 1);
      await appendMany(store, `${cat}-a`, 1);
      const peer = await WsPeer.open(url);
      try {
        peer.send({ type: 'subscribe', sub: 's', consumer: name, filter: { categories: [cat] }, req: 1 });
        await peer.waitFor(isType('caught_up', 's'), 'caught_up');
        assert.equal(peer.events('s').length, 4);
        peer.send({ type: 'park', sub: 's', position: 1, info: { reason: 'bad' }, req: 2 });
        assert.deepEqual(await peer.reply(2), { type: 'ok', req: 2, sub: 's', parkedThrough: 4 });
        // Nothing of b's stream was delivered after it: the parked position itself.
        peer.send({ type: 'park', sub: 's', position: 3, info: { reason: 'bad' }, req: 3 });
        assert.deepEqual(await peer.reply(3), { type: 'ok', req: 3, sub: 's', parkedThrough: 3 });
        const letters = await store.deadLetters.list(name);
        assert.deepEqual(
          letters.map((l) => [l.event.position, l.behind === null ? 'failed' : 'behind']),
          [
            [1, 'failed'],
            [2, 'behind'],
            [3, 'failed'],
            [4, 'behind'],
          ],
        );
      } finally {
        await peer.close();
      }
    }));

  it('unsubscribe and fail both answer closed, then ok; a refused fail leaves the subscription running', () =>
    withServer({}, async ({ url, store }) => {
      const cat = randomCategory();
      const [leaving, failing] = [randomConsumer(), randomConsumer()];
      await appendMany(store, `${cat}-1`, 2);
      const peer = await WsPeer.open(url);
      try {
        peer.send({ type: 'subscribe', sub: 'u', consumer: leaving, filter: { categories: [cat] }, req: 1 });
        peer.send({ type: 'subscribe', sub: 'f', consumer: failing, filter: { categories: [cat] }, req: 2 });
        await peer.waitFor(isType('caught_up', 'u'), 'u caught up');
        await peer.waitFor(isType('caught_up', 'f'), 'f caught up');
        const order = (sub: string, req: number): string[] =>
          peer.messages
            .filter((m) => m.sub === sub && (isType('closed')(m) || m.req === req))
            .map((m) => `${m.type}${m.type === 'closed' ? `:${String(m.reason)}` : ''}`);

        peer.send({ type: 'unsubscribe', sub: 'u', req: 3 });
        await peer.reply(3);
        assert.deepEqual(order('u', 3), ['closed:unsubscribed', 'ok']);
        assert.equal((await store.consumers.get(leaving)).status, 'stopped');

        peer.send({ type: 'fail', sub: 'f', info: { error: 'not an object' }, req: 4 });
        assert.equal(errorCode(await peer.reply(4)), 'invalid_input');
        await appendMany(store, `${cat}-2`, 1);
        await until(() => peer.events('f').length === 3, {
          message: 'f still delivers after a refused fail',
        });
        assert.deepEqual(order('f', 4), ['error']);

        peer.send({ type: 'fail', sub: 'f', info: { error: { message: 'boom' } }, req: 5 });
        await peer.reply(5);
        assert.deepEqual(order('f', 5), ['closed:failed', 'ok']);
        const info = await store.consumers.get(failing);
        assert.deepEqual([info.status, info.owner], ['failed', null]);
      } finally {
        await peer.close();
      }
    }));

  it('fences a stale owner: its ack fails with fenced and the subscription closes with fenced', async () => {
    const dir = tempDir();
    const store = await openSqliteStore({ path: dir.file('events.db') });
    const held: Subscription[] = [];
    // Keeps the server's subscriptions reachable, to stop one renewing its lease as a paused process would.
    const spy = new Proxy(store, {
      get(target, prop) {
        if (prop === 'subscribe') {
          return async (...args: Parameters<SqliteEventStore['subscribe']>) => {
            const s = await target.subscribe(...args);
            held.push(s);
            return s;
          };
        }
        const v = Reflect.get(target, prop, target) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const server = await startServer({ store: spy, port: 0 });
    const peer = await WsPeer.open(server.url);
    let takeover: Subscription | null = null;
    try {
      const name = randomConsumer();
      await appendMany(store, 'x-1', 2);
      peer.send({ type: 'subscribe', sub: 's', consumer: name, leaseTtlMs: 1000, req: 1 });
      await peer.waitFor(isType('caught_up'), 'caught_up');
      (held[0] as unknown as { suspendLeaseRenewal(): void }).suspendLeaseRenewal();
      takeover = await store.subscribe(name, { standby: true });
      peer.send({ type: 'ack', sub: 's', position: 2, req: 2 });
      assert.equal(errorCode(await peer.reply(2)), 'fenced');
      assert.equal((await peer.waitFor(isType('closed', 's'), 'closed')).reason, 'fenced');
      assert.equal((await store.consumers.get(name)).position, 0, 'the stale ack did not move the cursor');
    } finally {
      await takeover?.close();
      await peer.close();
      await server.close();
      await store.close();
      await dir.cleanup();
    }
  });

  it('limits subscriptions per connection (rate_limited) and applies maxInFlight instead of dropping', () =>
    withServer({ limits: { maxSubscriptionsPerConnection: 2 } }, async ({ url, store }) => {
      const cat = randomCategory();
      await appendMany(store, `${cat}-1`, 40);
      const peer = await WsPeer.open(url);
      try {
        peer.send({
          type: 'subscribe',
          sub: 'a',
          consumer: randomConsumer(),
          filter: { categories: [cat] },
          maxInFlight: 5,
          batchSize: 3,
          req: 1,
        });
        peer.send({ type: 'subscribe', sub: 'b', consumer: randomConsumer(), from: 'end', req: 2 });
        peer.send({ type: 'subscribe', sub: 'c', consumer: randomConsumer(), req: 3 });
        assert.equal(errorCode(await peer.reply(3)), 'rate_limited');
        await peer.waitFor(isType('subscribed', 'b'), 'b subscribed');
        // Acknowledge slowly: never more than maxInFlight events may be outstanding, and all 40 arrive in order.
        let acked = 0;
        let req = 10;
        while (acked < 40) {
          await until(() => peer.events('a').length > acked, { message: `events after ${acked}` });
          const received = peer.events('a').length;
          assert.ok(received - acked <= 5, `${received - acked} unacknowledged events exceed maxInFlight`);
          const position = peer.events('a')[received - 1]!.position;
          peer.send({ type: 'ack', sub: 'a', position, req: ++req });
          assert.equal((await peer.reply(req)).type, 'ok');
          acked = received;
        }
        assert.deepEqual(
          peer.events('a').map((e) => e.position),
          Array.from({ length: 40 }, (_, i) => i + 1),
        );
      } finally {
        await peer.close();
      }
    }));

  it('pull mode: sends only as many messages as granted with more', () =>
    withServer({}, async ({ url, store }) => {
      await appendMany(store, 'p-1', 6);
      const peer = await WsPeer.open(url);
      try {
        peer.send({
          type: 'subscribe',
          sub: 'p',
          consumer: randomConsumer(),
          batchSize: 2,
          credit: 0,
          req: 1,
        });
        await peer.waitFor(isType('subscribed'), 'subscribed');
        for (let granted = 1; granted <= 4; granted++) {
          peer.send({ type: 'more', sub: 'p', messages: 1 });
          await until(
            () =>
              peer.messages.filter((m) => m.sub === 'p' && (m.type === 'events' || m.type === 'caught_up'))
                .length === granted,
            {
              message: `message ${granted}`,
            },
          );
          // A ping round trip after each grant: had the server sent more than granted, it would show here.
          peer.send({ type: 'ping', req: 100 + granted });
          await peer.waitFor((m) => m.type === 'pong' && m.req === 100 + granted, 'pong');
          assert.equal(
            peer.messages.filter((m) => m.sub === 'p' && (m.type === 'events' || m.type === 'caught_up'))
              .length,
            granted,
          );
        }
        assert.deepEqual(
          peer.events('p').map((e) => e.position),
          [1, 2, 3, 4, 5, 6],
        );
        assert.ok(peer.messages.some(isType('caught_up', 'p')));
      } finally {
        await peer.close();
      }
    }));

  it('answers bad messages with invalid_input and keeps the connection', () =>
    withServer({}, async ({ url }) => {
      const peer = await WsPeer.open(url);
      try {
        const bad: [string | Buffer, string][] = [
          ['not json', 'message'],
          ['[1,2]', 'message'],
          ['{"type":"dance","req":1}', 'type'],
          ['{"type":"ack","sub":"nope","position":1,"req":2}', 'sub'],
          ['{"type":"subscribe","sub":"x","consumer":"bad name!","req":3}', 'consumer'],
          ['{"type":"subscribe","sub":"y","consumer":"c_v1","leaseTtlMs":-5,"req":4}', 'leaseTtlMs'],
          ['{"type":"subscribe","sub":"z","consumer":"c_v1","colour":"red","req":5}', 'colour'],
          ['{"type":"more","sub":"q","messages":0}', 'messages'],
          [Buffer.from([1, 2, 3]), 'message'],
        ];
        for (const [frame, field] of bad) {
          const before = peer.messages.length;
          peer.socket.send(frame);
          const err = await peer.waitFor(isType('error'), `error for ${String(frame)}`, before);
          assert.equal(errorCode(err), 'invalid_input', String(frame));
          assert.equal((err.error as { details: { field: string } }).details.field, field, String(frame));
        }
        peer.send({ type: 'ping', req: 'p' });
        await peer.waitFor((m) => m.type === 'pong' && m.req === 'p', 'pong');
      } finally {
        await peer.close();
      }
    }));

  it('graceful shutdown closes subscriptions (reason shutdown), releases leases, and closes the socket with 1001', async () => {
    const dir = tempDir();
    const store = await openSqliteStore({ path: dir.file('events.db') });
    let server: RunningServer | null = await startServer({ store, port: 0 });
    try {
      const name = randomConsumer();
      const peer = await WsPeer.open(server.url);
      peer.send({ type: 'subscribe', sub: 's', consumer: name, leaseTtlMs: 300_000, req: 1 });
      await peer.waitFor(isType('caught_up'), 'caught_up');
      await server.close();
      server = null;
      assert.equal((await peer.waitFor(isType('closed'), 'closed')).reason, 'shutdown');
      await until(() => peer.closeCode !== null, { message: 'socket closed' });
      assert.equal(peer.closeCode, 1001);
      const info = await store.consumers.get(name);
      assert.deepEqual([info.status, info.owner], ['stopped', null]);
    } finally {
      await server?.close();
      await store.close();
      await dir.cleanup();
    }
  });
});
