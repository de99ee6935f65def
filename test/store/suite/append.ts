import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { JsonValue } from '../../../src/core/json.js';
import { randomStream } from '../../support/names.js';
import { ISO_MS, UUID_V7, collect, events, rejectsWith, withStore, type MakeStore } from './context.js';

export function appendTests(make: MakeStore): void {
  describe('append', () => {
    it('an empty store has head 0 and unknown streams have version 0', () =>
      withStore(make, async (store) => {
        assert.equal(await store.headPosition(), 0);
        assert.equal(await store.streamVersion(randomStream()), 0);
        assert.deepEqual(await collect(store.readAll()), []);
        assert.deepEqual(await collect(store.readStream(randomStream())), []);
      }));

    it('records one event with every field and returns the append result', () =>
      withStore(make, async (store) => {
        const stream = randomStream('invoice');
        const before = Date.now();
        const result = await store.append(stream, [{ type: 'invoice.issued', data: { amount: 42 } }]);
        const after = Date.now();
        assert.equal(result.stream, stream);
        assert.equal(result.version, 1);
        assert.equal(result.firstPosition, 1);
        assert.equal(result.lastPosition, 1);
        assert.equal(result.duplicate, false);
        assert.equal(result.ids.length, 1);
        const [e] = await collect(store.readStream(stream));
        assert.ok(e);
        assert.equal(e.id, result.ids[0]);
        assert.equal(e.stream, stream);
        assert.equal(e.type, 'invoice.issued');
        assert.equal(e.version, 1);
        assert.equal(e.position, 1);
        assert.deepEqual(e.data, { amount: 42 });
        assert.deepEqual(e.metadata, {}, 'metadata defaults to {}');
        assert.match(e.recordedAt, ISO_MS);
        const at = Date.parse(e.recordedAt);
        assert.ok(at >= before - 1000 && at <= after + 1000, `recordedAt ${e.recordedAt} is about now`);
        assert.equal(await store.headPosition(), 1);
        assert.equal(await store.streamVersion(stream), 1);
      }));

    it('generates distinct UUIDv7 ids in creation order when none are given', () =>
      withStore(make, async (store) => {
        const result = await store.append(randomStream(), events(50));
        assert.equal(new Set(result.ids).size, 50);
        for (const id of result.ids) assert.match(id, UUID_V7);
        assert.deepEqual([...result.ids].sort(), result.ids, 'ids of one append sort in event order');
      }));

    it("keeps the caller's ids (any UUID version), normalised to lower case", () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        const v4 = randomUUID();
        const upper = randomUUID().toUpperCase();
        const result = await store.append(stream, [
          { id: v4, type: 'a', data: 1 },
          { id: upper, type: 'b', data: 2 },
        ]);
        assert.deepEqual(result.ids, [v4, upper.toLowerCase()]);
        const read = await collect(store.readStream(stream));
        assert.deepEqual(
          read.map((e) => e.id),
          [v4, upper.toLowerCase()],
        );
      }));

    it('appends a batch atomically with contiguous versions and positions', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        const r1 = await store.append(stream, events(3));
        assert.deepEqual([r1.version, r1.firstPosition, r1.lastPosition], [3, 1, 3]);
        const r2 = await store.append(stream, events(2, 'x', 3));
        assert.deepEqual([r2.version, r2.firstPosition, r2.lastPosition], [5, 4, 5]);
        const read = await collect(store.readStream(stream));
        assert.deepEqual(
          read.map((e) => [e.version, e.position, (e.data as { i: number }).i]),
          [
            [1, 1, 0],
            [2, 2, 1],
            [3, 3, 2],
            [4, 4, 3],
            [5, 5, 4],
          ],
        );
        assert.equal(read[0]?.recordedAt, read[2]?.recordedAt, 'one append commits at one instant');
      }));

    it('keeps per-stream versions contiguous and global positions strictly increasing across streams', () =>
      withStore(make, async (store) => {
        const a = randomStream('a');
        const b = randomStream('b');
        await store.append(a, events(2));
        await store.append(b, events(1));
        await store.append(a, events(1));
        await store.append(b, events(3));
        const all = await collect(store.readAll());
        assert.deepEqual(
          all.map((e) => e.position),
          [1, 2, 3, 4, 5, 6, 7],
        );
        assert.deepEqual(
          all.map((e) => [e.stream === a ? 'a' : 'b', e.version]),
          [
            ['a', 1],
            ['a', 2],
            ['b', 1],
            ['a', 3],
            ['b', 2],
            ['b', 3],
            ['b', 4],
          ],
        );
        assert.equal(await store.streamVersion(a), 3);
        assert.equal(await store.streamVersion(b), 4);
        assert.equal(await store.headPosition(), 7);
      }));

    it('stores JSON data and metadata faithfully', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        const payloads = [
          null,
          true,
          0,
          -12.5,
          1e21,
          'text with "quotes", \\ backslash, newline\n and émoji 🎉',
          '',
          [],
          [1, 'two', null, { three: [3] }],
          { nested: { deep: { deeper: [{ k: 'v' }] } }, 'key with spaces': 1, '': 'empty key' },
        ];
        const metadata = {
          commandId: randomUUID(),
          correlationId: 'c-1',
          causationId: 'x',
          tags: ['a', 'b'],
          n: 1.5,
        };
        await store.append(
          stream,
          payloads.map((data) => ({ type: 'payload', data, metadata })),
        );
        const read = await collect(store.readStream(stream));
        assert.deepEqual(
          read.map((e) => e.data),
          payloads,
        );
        for (const e of read) assert.deepEqual(e.metadata, metadata);
      }));

    it('reads data back as its JSON round trip (-0 as 0, a "__proto__" key as a plain key)', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        const data = JSON.parse('{"z": -0, "list": [-0, 1e-7], "__proto__": {"x": 1}}') as JsonValue;
        await store.append(stream, [{ type: 't', data, metadata: { m: -0 } }]);
        const [e] = await collect(store.readStream(stream));
        assert.ok(e);
        assert.equal(JSON.stringify(e.data), '{"z":0,"list":[0,1e-7],"__proto__":{"x":1}}');
        const read = e.data as { z: number; list: number[] };
        assert.ok(Object.is(read.z, 0) && Object.is(read.list[0], 0), '-0 reads back as 0');
        assert.equal(
          Object.getPrototypeOf(read),
          Object.prototype,
          'a "__proto__" key does not replace the prototype',
        );
        assert.ok(Object.is(e.metadata.m, 0));
      }));

    it('is not affected by callers mutating the input after an append or the events they read', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        const input = { type: 't', data: { list: [1, 2] }, metadata: { m: 'x' } };
        await store.append(stream, [input]);
        input.data.list.push(3);
        input.metadata.m = 'changed';
        const [first] = await collect(store.readStream(stream));
        assert.deepEqual(first?.data, { list: [1, 2] });
        assert.deepEqual(first?.metadata, { m: 'x' });
        assert.ok(first);
        const readData = first.data;
        readData.list.push(99);
        const [again] = await collect(store.readStream(stream));
        assert.deepEqual(again?.data, { list: [1, 2] });
      }));

    it('accepts the largest stream name and type, and exactly the maximum number of events', () =>
      withStore(make, async (store) => {
        const stream = 's'.repeat(200);
        const type = 't'.repeat(256);
        const r = await store.append(stream, [{ type, data: null }]);
        assert.equal(r.version, 1);
        const big = await store.append(randomStream(), events(5000));
        assert.equal(big.version, 5000);
        assert.equal(big.lastPosition - big.firstPosition, 4999);
        const [e] = await collect(store.readStream(stream));
        assert.equal(e?.type, type);
      }));

    it('rejects every call after close with closed, and close is safe to call twice', async () => {
      const fixture = await make();
      try {
        const stream = randomStream();
        await fixture.store.append(stream, events(1));
        await fixture.store.close();
        await fixture.store.close();
        await rejectsWith(fixture.store.append(stream, events(1)), 'closed');
      } finally {
        await fixture.cleanup();
      }
    });
  });
}
