/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-argument --
   reply bodies are untyped JSON on purpose: the assertions check them field by field. */
/**
 * The HTTP API behaviour suite: status codes, error bodies, paging, consumers, dead letters, ops routes.
 * Run in-process (fastify inject) and over a real port by http.test.ts.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { EventStore } from '../../src/core/eventStore.js';
import type { Subscription } from '../../src/core/subscription.js';
import { randomCategory, randomConsumer, randomStream } from '../support/names.js';
import type { Requester } from './requester.js';

export interface HttpTarget {
  request: Requester;
  store: EventStore;
  cleanup(): Promise<void>;
}

/** The target must use a store with `maxEventBytes: 10000` and a server with `maxBodyBytes: 100000`. */
export type MakeHttpTarget = () => Promise<HttpTarget>;

const ID1 = '0190f5c2-8e7a-7b4c-9d2e-3f1a2b3c4d51';
const ID2 = '0190f5c2-8e7a-7b4c-9d2e-3f1a2b3c4d52';

/** The first batch of events, read without ending the subscription (a `for await` left early would close it). */
async function firstBatch(sub: Subscription) {
  const iterator = sub[Symbol.asyncIterator]();
  for (;;) {
    const r = await iterator.next();
    if (r.done) throw new Error('subscription ended without events');
    if (r.value.kind === 'events') return r.value.events;
  }
}

export function describeHttpApi(name: string, make: MakeHttpTarget): void {
  describe(`HTTP API: ${name}`, () => {
    let t: HttpTarget;
    before(async () => {
      t = await make();
    });
    after(async () => {
      await t.cleanup();
    });

    const appendPath = (s: string) => `/v1/streams/${encodeURIComponent(s)}/events`;

    it('append answers 201, and the same ids again 200 duplicate with the original result', async () => {
      const s = randomStream();
      const body = {
        events: [
          { id: ID1, type: 'a', data: { n: 1 } },
          { id: ID2, type: 'b', data: null },
        ],
      };
      const first = await t.request('POST', appendPath(s), { body });
      assert.equal(first.status, 201, first.text);
      assert.equal(first.json.version, 2);
      assert.equal(first.json.duplicate, false);
      const head = await t.store.headPosition();
      const again = await t.request('POST', appendPath(s), { body });
      assert.equal(again.status, 200, again.text);
      assert.deepEqual({ ...again.json, duplicate: false }, first.json);
      assert.equal(again.json.duplicate, true);
      assert.equal(await t.store.headPosition(), head, 'a duplicate writes nothing');
      // Same ids with other content: a conflict, not a duplicate.
      const conflict = await t.request('POST', appendPath(s), {
        body: {
          events: [
            { id: ID1, type: 'a', data: { n: 2 } },
            { id: ID2, type: 'b', data: null },
          ],
        },
      });
      assert.equal(conflict.status, 409);
      assert.equal(conflict.json.error.code, 'idempotency_conflict');
    });

    it('expectedVersion: a mismatch is 409 naming the actual version; a match appends', async () => {
      const s = randomStream();
      assert.equal(
        (
          await t.request('POST', appendPath(s), {
            body: { events: [{ type: 'a', data: 1 }], expectedVersion: 'no_stream' },
          })
        ).status,
        201,
      );
      const bad = await t.request('POST', appendPath(s), {
        body: { events: [{ type: 'a', data: 2 }], expectedVersion: 0 },
      });
      assert.equal(bad.status, 409);
      assert.equal(bad.json.error.code, 'wrong_expected_version');
      assert.equal(bad.json.error.details.actual, 1);
      assert.match(bad.json.error.message, /version 1/);
      const good = await t.request('POST', appendPath(s), {
        body: { events: [{ type: 'a', data: 2 }], expectedVersion: 1 },
      });
      assert.equal(good.status, 201);
      assert.equal(good.json.version, 2);
    });

    it('POST /v1/appends decides each append on its own: results and errors in list order', async () => {
      const [a, b, c] = [randomStream(), randomStream(), randomStream()];
      const id = randomUUID();
      const first = await t.request('POST', appendPath(a), {
        body: { events: [{ id, type: 'a', data: 1 }] },
      });
      assert.equal(first.status, 201, first.text);
      const head = await t.store.headPosition();
      const r = await t.request('POST', '/v1/appends', {
        body: {
          appends: [
            // A retry of the append above: a duplicate, with the original result.
            { stream: a, events: [{ id, type: 'a', data: 1 }] },
            { stream: b, events: [{ type: 'b', data: 1 }], expectedVersion: 'no_stream' },
            { stream: a, events: [{ type: 'a', data: 2 }], expectedVersion: 0 },
            { stream: c, events: [{ type: 5, data: 1 }] },
            { stream: 's'.repeat(201), events: [{ type: 'a', data: 1 }] },
            { stream: c, events: [{ type: 'c', data: 'x'.repeat(20_000) }] },
            { events: [{ type: 'c', data: 1 }] },
            'not an append',
            { stream: c, events: [{ type: 'c', data: 1 }], expectedVersion: 0 },
          ],
        },
      });
      assert.equal(r.status, 200, r.text);
      const results = r.json.results as {
        [key: string]: unknown;
        error: { code: string; details: Record<string, unknown> };
      }[];
      assert.equal(results.length, 9);
      assert.deepEqual(results[0], { ...first.json, duplicate: true });
      assert.equal(results[1]!.stream, b);
      assert.equal(results[1]!.version, 1);
      assert.equal(results[1]!.duplicate, false);
      assert.equal(results[2]!.error.code, 'wrong_expected_version');
      assert.equal(results[2]!.error.details.actual, 1);
      // Fields are named within the append, as the single-append route names them.
      assert.deepEqual(
        results.slice(3, 8).map((x) => [x.error.code, x.error.details.field]),
        [
          ['invalid_input', 'events[0].type'],
          ['invalid_input', 'stream'],
          ['too_large', 'events[0]'],
          ['invalid_input', 'stream'],
          ['invalid_input', 'append'],
        ],
      );
      assert.equal(results[8]!.version, 1);
      assert.equal(await t.store.headPosition(), head + 2, 'only the two new appends wrote');
      assert.equal(await t.store.streamVersion(a), 1);
    });

    for (const [what, body, field] of [
      ['no appends', { appends: [] }, 'appends'],
      ['appends not an array', { appends: {} }, 'appends'],
      [
        '1001 appends',
        { appends: Array.from({ length: 1001 }, () => ({ stream: 'a', events: [{ type: 'a', data: 1 }] })) },
        'appends',
      ],
      [
        'an unknown top-level field',
        { appends: [{ stream: 'a', events: [{ type: 'a', data: 1 }] }], extra: 1 },
        'extra',
      ],
      ['a body that is an array', [], 'body'],
    ] as const) {
      it(`POST /v1/appends with ${what} is 400 naming ${field}, and writes nothing`, async () => {
        const head = await t.store.headPosition();
        const r = await t.request('POST', '/v1/appends', { body });
        assert.equal(r.status, 400, r.text);
        assert.equal(r.json.error.code, 'invalid_input');
        assert.equal(r.json.error.details.field, field);
        assert.equal(await t.store.headPosition(), head);
      });
    }

    const badAppends: [string, string | undefined, unknown, string][] = [
      ['events missing', undefined, {}, 'events'],
      ['events not an array', undefined, { events: 'x' }, 'events'],
      ['no events', undefined, { events: [] }, 'events'],
      ['an unknown top-level field', undefined, { events: [{ type: 'a', data: 1 }], extra: true }, 'extra'],
      ['a type of the wrong type', undefined, { events: [{ type: 5, data: 1 }] }, 'events[0].type'],
      [
        'missing data in the second event',
        undefined,
        { events: [{ type: 'a', data: 1 }, { type: 'b' }] },
        'events[1].data',
      ],
      [
        'an unknown event field',
        undefined,
        { events: [{ type: 'a', data: 1, version: 3 }] },
        'events[0].version',
      ],
      ['a bad id', undefined, { events: [{ id: 'nope', type: 'a', data: 1 }] }, 'events[0].id'],
      [
        'a negative expectedVersion',
        undefined,
        { events: [{ type: 'a', data: 1 }], expectedVersion: -1 },
        'expectedVersion',
      ],
      [
        'a fractional expectedVersion',
        undefined,
        { events: [{ type: 'a', data: 1 }], expectedVersion: 1.5 },
        'expectedVersion',
      ],
      ['a body that is an array', undefined, [{ type: 'a', data: 1 }], 'body'],
      ['a stream name of 201 characters', 's'.repeat(201), { events: [{ type: 'a', data: 1 }] }, 'stream'],
      ['a stream name with a control character', 'a\u0001b', { events: [{ type: 'a', data: 1 }] }, 'stream'],
    ];
    for (const [what, stream, body, field] of badAppends) {
      it(`append with ${what} is 400 naming ${field}, and writes nothing`, async () => {
        const head = await t.store.headPosition();
        const r = await t.request('POST', appendPath(stream ?? randomStream()), { body });
        assert.equal(r.status, 400, r.text);
        assert.equal(r.json.error.code, 'invalid_input');
        assert.equal(r.json.error.details.field, field);
        assert.ok(r.json.error.message.includes(field), r.json.error.message);
        assert.equal(await t.store.headPosition(), head);
      });
    }

    it('malformed JSON, an empty body and a wrong content type are 400, never 5xx', async () => {
      const s = randomStream();
      for (const raw of ['{', '{"events": [}', 'nul', '"\\ud800', '\u0000']) {
        const r = await t.request('POST', appendPath(s), { raw });
        assert.equal(r.status, 400, `${JSON.stringify(raw)}: ${r.text}`);
        assert.equal(r.json.error.code, 'invalid_input');
      }
      const empty = await t.request('POST', appendPath(s), { raw: '' });
      assert.equal(empty.status, 400, empty.text);
      const xml = await t.request('POST', appendPath(s), {
        raw: '<events/>',
        headers: { 'content-type': 'application/xml' },
      });
      assert.equal(xml.status, 400, xml.text);
      assert.equal(xml.json.error.details.field, 'content-type');
      assert.equal(await t.store.streamVersion(s), 0);
    });

    it('a body over the body limit and an event over the event limit are 413', async () => {
      const s = randomStream();
      const huge = await t.request('POST', appendPath(s), {
        body: { events: [{ type: 'a', data: 'x'.repeat(200_000) }] },
      });
      assert.equal(huge.status, 413, huge.text.slice(0, 200));
      assert.equal(huge.json.error.code, 'too_large');
      const big = await t.request('POST', appendPath(s), {
        body: { events: [{ type: 'a', data: 'x'.repeat(20_000) }] },
      });
      assert.equal(big.status, 413, big.text.slice(0, 200));
      assert.equal(big.json.error.details.field, 'events[0]');
      assert.equal(await t.store.streamVersion(s), 0);
    });

    it('reads a stream in pages with next, and reports its version', async () => {
      const s = `${randomStream()}/with slash`;
      const events = Array.from({ length: 5 }, (_, i) => ({ type: 'n', data: i }));
      assert.equal((await t.request('POST', appendPath(s), { body: { events } })).status, 201);
      const seen: number[] = [];
      let from: number | null = 1;
      let pages = 0;
      while (from !== null) {
        const r = await t.request('GET', `${appendPath(s)}?fromVersion=${from}&limit=2`);
        assert.equal(r.status, 200, r.text);
        assert.equal(r.json.version, 5);
        assert.equal(r.json.stream, s);
        seen.push(...r.json.events.map((e: { data: number }) => e.data));
        from = r.json.next;
        pages++;
      }
      assert.deepEqual(seen, [0, 1, 2, 3, 4]);
      assert.equal(pages, 3);
      const none = await t.request('GET', appendPath(randomStream()));
      assert.deepEqual(
        [none.status, none.json.version, none.json.events, none.json.next],
        [200, 0, [], null],
      );
    });

    it('reads a stream as of a position (toPosition) or a time (toTime), in pages', async () => {
      const s = randomStream();
      for (let i = 0; i < 4; i++) {
        assert.equal(
          (await t.request('POST', appendPath(s), { body: { events: [{ type: 'n', data: i }] } })).status,
          201,
        );
      }
      const all = (await t.request('GET', appendPath(s))).json.events as {
        position: number;
        recordedAt: string;
      }[];
      const cut = all[2]!;
      const data = (r: { json: { events: { data: number }[] } }) => r.json.events.map((e) => e.data);
      const byPosition = await t.request('GET', `${appendPath(s)}?toPosition=${cut.position}`);
      assert.equal(byPosition.status, 200, byPosition.text);
      assert.deepEqual(data(byPosition), [0, 1, 2]);
      assert.equal(byPosition.json.version, 4, "version is the stream's current version");
      assert.equal(byPosition.json.next, null);
      const firstPage = await t.request('GET', `${appendPath(s)}?toPosition=${cut.position}&limit=2`);
      assert.deepEqual([data(firstPage), firstPage.json.next], [[0, 1], 3]);
      const secondPage = await t.request(
        'GET',
        `${appendPath(s)}?toPosition=${cut.position}&limit=2&fromVersion=3`,
      );
      assert.deepEqual([data(secondPage), secondPage.json.next], [[2], null]);
      const byTime = await t.request('GET', `${appendPath(s)}?toTime=${encodeURIComponent(cut.recordedAt)}`);
      assert.equal(byTime.status, 200, byTime.text);
      assert.deepEqual(
        data(byTime),
        all.filter((e) => e.recordedAt <= cut.recordedAt).map((_, i) => i),
      );
    });

    it('reads all events after a position, filtered by type and category, with head and next', async () => {
      const cat = randomCategory();
      await t.request('POST', appendPath(`${cat}-1`), {
        body: {
          events: [
            { type: 'x.a', data: 1 },
            { type: 'x.b', data: 2 },
          ],
        },
      });
      await t.request('POST', appendPath(`${cat}-2`), { body: { events: [{ type: 'x.a', data: 3 }] } });
      const r = await t.request('GET', `/v1/events?categories=${cat}&types=x.a&limit=1`);
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(
        r.json.events.map((e: { data: number }) => e.data),
        [1],
      );
      assert.equal(r.json.head, await t.store.headPosition());
      const next = await t.request(
        'GET',
        `/v1/events?categories=${cat}&types=x.a&limit=5&after=${r.json.next}`,
      );
      assert.deepEqual(
        next.json.events.map((e: { data: number }) => e.data),
        [3],
      );
      assert.equal(next.json.next, null);
      const prefixed = await t.request('GET', `/v1/events?streamPrefixes=${cat}-2`);
      assert.deepEqual(
        prefixed.json.events.map((e: { data: number }) => e.data),
        [3],
      );
    });

    const badQueries: [string, string][] = [
      ['/v1/events?limit=-1', 'limit'],
      ['/v1/events?limit=0', 'limit'],
      ['/v1/events?after=abc', 'after'],
      ['/v1/events?after=1e3', 'after'],
      ['/v1/events?after=99999999999999999999', 'after'],
      ['/v1/events?colour=red', 'colour'],
      ['/v1/events?types=', 'types[0]'],
      ['/v1/streams/s-1/events?fromVersion=-2', 'fromVersion'],
      ['/v1/streams/s-1/events?toPosition=-1', 'toPosition'],
      ['/v1/streams/s-1/events?toPosition=99999999999999999999', 'toPosition'],
      ['/v1/streams/s-1/events?toTime=yesterday', 'toTime'],
      ['/v1/streams/s-1/events?toTime=2026-03-01T12:00:00', 'toTime'],
      ['/v1/streams/s-1/events?toTime=2026-03-01&toTime=2026-03-02', 'toTime'],
      ['/v1/streams/s-1/events?toPosition=3&toTime=2026-03-01T12:00:00Z', 'toTime'],
      ['/v1/consumers/bad%20name', 'name'],
      ['/v1/consumers/x/dead-letters?all=maybe', 'all'],
    ];
    for (const [path, field] of badQueries) {
      it(`GET ${path} is 400 naming ${field}`, async () => {
        const r = await t.request('GET', path);
        assert.equal(r.status, 400, r.text);
        assert.equal(r.json.error.details.field, field);
      });
    }

    it('unknown routes and consumers are 404 with a JSON error', async () => {
      const route = await t.request('GET', '/v1/nothing');
      assert.equal(route.status, 404);
      assert.equal(route.json.error.code, 'not_found');
      const put = await t.request('PUT', appendPath('s-1'), { body: {} });
      assert.equal(put.status, 404);
      const consumer = await t.request('GET', `/v1/consumers/${randomConsumer()}`);
      assert.equal(consumer.status, 404);
      assert.equal(consumer.json.error.code, 'not_found');
      for (const [method, path, body] of [
        ['DELETE', `/v1/consumers/${randomConsumer()}`, undefined],
        ['POST', `/v1/consumers/${randomConsumer()}/reset`, { position: 0 }],
        ['POST', `/v1/consumers/${randomConsumer()}/dead-letters/retry`, { stream: 's-1' }],
      ] as const) {
        const r = await t.request(method, path, body === undefined ? {} : { body });
        assert.equal(r.status, 404, `${method} ${path}: ${r.text}`);
      }
    });

    it('consumers: list, get, reset (409 while owned), delete', async () => {
      const cat = randomCategory();
      const name = randomConsumer();
      await t.request('POST', appendPath(`${cat}-1`), {
        body: {
          events: [
            { type: 'a', data: 1 },
            { type: 'a', data: 2 },
          ],
        },
      });
      const sub = await t.store.subscribe(name, { filter: { categories: [cat] } });
      let acked = 0;
      try {
        const batch = await firstBatch(sub);
        acked = batch[batch.length - 1]!.position;
        await sub.ack(acked);
        const busy = await t.request('POST', `/v1/consumers/${name}/reset`, { body: { position: 0 } });
        assert.equal(busy.status, 409, busy.text);
        assert.equal(busy.json.error.code, 'consumer_busy');
        const busyDelete = await t.request('DELETE', `/v1/consumers/${name}`);
        assert.equal(busyDelete.status, 409);
      } finally {
        await sub.close();
      }
      const list = await t.request('GET', '/v1/consumers');
      assert.equal(list.status, 200);
      const mine = list.json.consumers.find((c: { name: string }) => c.name === name);
      assert.ok(mine, 'the consumer is listed');
      assert.deepEqual(mine.filter, { categories: [cat] });
      const got = await t.request('GET', `/v1/consumers/${name}`);
      assert.equal(got.status, 200);
      assert.equal(got.json.position, acked, 'the cursor is at the acknowledged end of the batch');
      const badReset = await t.request('POST', `/v1/consumers/${name}/reset`, { body: { position: -1 } });
      assert.equal(badReset.status, 400);
      assert.equal(badReset.json.error.details.field, 'position');
      const reset = await t.request('POST', `/v1/consumers/${name}/reset`, { body: { position: 0 } });
      assert.equal(reset.status, 200, reset.text);
      assert.equal(reset.json.position, 0);
      const del = await t.request('DELETE', `/v1/consumers/${name}`);
      assert.equal(del.status, 200, del.text);
      assert.equal((await t.request('GET', `/v1/consumers/${name}`)).status, 404);
    });

    it('consumers: pause and resume (admin), shown as paused in the consumer and in /metrics', async () => {
      const name = randomConsumer();
      await (await t.store.subscribe(name, { from: 'end' })).close();
      const paused = await t.request('POST', `/v1/consumers/${name}/pause`, { body: { by: 'on call' } });
      assert.equal(paused.status, 200, paused.text);
      assert.equal(paused.json.status, 'paused');
      assert.equal(paused.json.pause.reason, 'operator');
      assert.match(paused.json.pause.by, /on call/);
      // No body at all pauses too (and changes nothing on a paused consumer).
      const again = await t.request('POST', `/v1/consumers/${name}/pause`);
      assert.equal(again.status, 200, again.text);
      assert.deepEqual(again.json.pause, paused.json.pause);
      const metrics = await t.request('GET', '/metrics');
      assert.match(
        metrics.text,
        new RegExp(`^idem_consumer_status\\{consumer="${name}",status="paused"\\} 1$`, 'm'),
      );
      const bad = await t.request('POST', `/v1/consumers/${name}/pause`, { body: { by: 7 } });
      assert.equal(bad.status, 400, bad.text);
      assert.equal(bad.json.error.details.field, 'by');
      const resumed = await t.request('POST', `/v1/consumers/${name}/resume`);
      assert.equal(resumed.status, 200, resumed.text);
      assert.equal(resumed.json.status, 'stopped');
      assert.equal(resumed.json.pause, null);
      assert.equal((await t.request('POST', `/v1/consumers/${randomConsumer()}/pause`)).status, 404);
    });

    it('dead letters: list after a park, skip one entity and retry another', async () => {
      const cat = randomCategory();
      const name = randomConsumer();
      await t.request('POST', appendPath(`${cat}-1`), { body: { events: [{ type: 'a', data: 1 }] } });
      await t.request('POST', appendPath(`${cat}-2`), { body: { events: [{ type: 'a', data: 2 }] } });
      const sub = await t.store.subscribe(name, { filter: { categories: [cat] } });
      try {
        const batch = await firstBatch(sub);
        assert.equal(batch.length, 2);
        for (const e of batch)
          await sub.park(e.position, {
            reason: 'handler failed',
            error: { message: `boom ${e.stream}` },
            attempts: 3,
          });
        const list = await t.request('GET', `/v1/consumers/${name}/dead-letters`);
        assert.equal(list.status, 200, list.text);
        assert.deepEqual(
          list.json.deadLetters.map((d: { event: { stream: string } }) => d.event.stream),
          [`${cat}-1`, `${cat}-2`],
        );
        assert.equal(list.json.deadLetters[0].attempts, 3);
        const badSelector = await t.request('POST', `/v1/consumers/${name}/dead-letters/skip`, {
          body: { colour: 'red' },
        });
        assert.equal(badSelector.status, 400);
        const skip = await t.request('POST', `/v1/consumers/${name}/dead-letters/skip`, {
          body: { stream: `${cat}-1`, by: 'ops-test' },
        });
        assert.equal(skip.status, 200, skip.text);
        assert.equal(skip.json.count, 1);
        const retry = await t.request('POST', `/v1/consumers/${name}/dead-letters/retry`, {
          body: { id: batch[1]!.id },
        });
        assert.equal(retry.status, 200, retry.text);
        assert.equal(retry.json.count, 1);
        const all = await t.request('GET', `/v1/consumers/${name}/dead-letters?all=true`);
        const skipped = all.json.deadLetters.find((d: { status: string }) => d.status === 'skipped');
        assert.ok(skipped, all.text);
        assert.match(skipped.skippedBy, /ops-test/);
      } finally {
        await sub.close();
      }
    });

    it('/health reports the store and its migrations; /metrics is Prometheus text with store and consumer figures', async () => {
      const health = await t.request('GET', '/health');
      assert.equal(health.status, 200, health.text);
      assert.equal(health.json.status, 'ok');
      assert.equal(health.json.store.ok, true);
      assert.equal(health.json.migrations.ok, true);
      const name = randomConsumer();
      const sub = await t.store.subscribe(name, { from: 'end' });
      await sub.close();
      const metrics = await t.request('GET', '/metrics');
      assert.equal(metrics.status, 200);
      assert.match(metrics.contentType, /text\/plain/);
      assert.match(metrics.text, new RegExp(`^idem_head_position ${await t.store.headPosition()}$`, 'm'));
      assert.match(metrics.text, new RegExp(`^idem_consumer_position\\{consumer="${name}"\\} \\d+$`, 'm'));
      assert.match(metrics.text, new RegExp(`^idem_consumer_lag_events\\{consumer="${name}"\\} 0$`, 'm'));
      assert.match(metrics.text, /^idem_appends_total\{result="created"\} \d+$/m);
      const page = await t.request('GET', '/');
      assert.equal(page.status, 200);
      assert.match(page.contentType, /text\/html/);
    });

    it('GET /v1/subscribe without a WebSocket upgrade is 400', async () => {
      const r = await t.request('GET', '/v1/subscribe');
      assert.equal(r.status, 400);
      assert.equal(r.json.error.code, 'invalid_input');
    });
  });
}
