import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { randomCategory, randomConsumer, randomStream } from '../../support/names.js';
import {
  appendN,
  appendRounds,
  nextEvents,
  nextMessage,
  Reader,
  readAllEvents,
  streams,
  withStore,
  type MakeStore,
} from './context.js';

/** Delivery: catch-up, caught_up, live, filters, start positions, the seam. */
export function deliveryTests(makeStore: MakeStore): void {
  describe('delivery', () => {
    it('catches up from the start, signals caught_up at the head, then delivers live appends', () =>
      withStore(makeStore, async (store) => {
        const s = randomStream();
        await appendN(store, s, 5);
        const sub = await store.subscribe(randomConsumer());
        const it = sub[Symbol.asyncIterator]();
        try {
          assert.equal(sub.startPosition, 0);
          const first = await nextMessage(it);
          assert.equal(first.kind, 'events');
          assert.deepEqual(first.kind === 'events' && first.events.map((e) => e.position), [1, 2, 3, 4, 5]);
          assert.equal(first.kind === 'events' && first.redelivery, false);
          assert.deepEqual(await nextMessage(it), { kind: 'caught_up', position: 5 });
          await sub.ack(5);
          const pending = nextEvents(it);
          await store.append(s, [{ type: 'late', data: 1 }]);
          const live = await pending;
          assert.deepEqual(
            live.events.map((e) => [e.position, e.type, e.version]),
            [[6, 'late', 6]],
          );
        } finally {
          await sub.close();
        }
      }));

    it('lets timers and I/O run between the pages of a catch-up (a synchronous store does not hold the event loop)', () =>
      withStore(makeStore, async (store) => {
        const s = randomStream();
        await store.append(
          s,
          Array.from({ length: 50 }, (_, i) => ({ type: 'thing.happened', data: { i } })),
        );
        const sub = await store.subscribe(randomConsumer(), { batchSize: 5 });
        let immediateRan = false;
        setImmediate(() => (immediateRan = true));
        let pages = 0;
        let firstPageAfterImmediate = 0;
        try {
          for await (const m of sub) {
            if (m.kind !== 'events') break;
            pages++;
            if (immediateRan && firstPageAfterImmediate === 0) firstPageAfterImmediate = pages;
            await sub.ack(m.events[m.events.length - 1]!.position);
          }
          assert.equal(pages, 10);
          assert.ok(
            firstPageAfterImmediate > 0 && firstPageAfterImmediate < pages,
            `the event loop got a turn only after page ${firstPageAfterImmediate || 'none'} of ${pages}`,
          );
        } finally {
          await sub.close();
        }
      }));

    it('signals caught_up at position 0 for an empty store', () =>
      withStore(makeStore, async (store) => {
        const sub = await store.subscribe(randomConsumer());
        try {
          assert.deepEqual(await nextMessage(sub[Symbol.asyncIterator]()), {
            kind: 'caught_up',
            position: 0,
          });
        } finally {
          await sub.close();
        }
      }));

    it('delivers only events matching the filter (types, categories, stream prefixes)', () =>
      withStore(makeStore, async (store) => {
        const cat = randomCategory();
        const other = randomCategory();
        const a = `${cat}-1`;
        const b = `${other}-2`;
        const c = `${other}x-3`;
        for (let i = 0; i < 3; i++) {
          await store.append(a, [
            { type: 'keep', data: i },
            { type: 'drop', data: i },
          ]);
          await store.append(b, [{ type: 'keep', data: i }]);
          await store.append(c, [{ type: 'keep', data: i }]);
        }
        const byType = new Reader(await store.subscribe(randomConsumer(), { filter: { types: ['keep'] } }));
        const byCat = new Reader(await store.subscribe(randomConsumer(), { filter: { categories: [cat] } }));
        const byPrefix = new Reader(
          await store.subscribe(randomConsumer(), {
            filter: { streamPrefixes: [`${other}x`] },
            batchSize: 1,
          }),
        );
        try {
          assert.deepEqual(
            (await byType.waitForEvents(9)).map((e) => e.type),
            Array<string>(9).fill('keep'),
          );
          assert.ok((await byCat.waitForEvents(6)).every((e) => e.stream === a));
          assert.ok((await byPrefix.waitForEvents(3)).every((e) => e.stream === c));
          await byPrefix.waitFor(() => byPrefix.messages.some((m) => m.kind === 'caught_up'), 'caught_up');
          assert.equal(byPrefix.events.length, 3);
        } finally {
          await Promise.all([byType.stop(), byCat.stop(), byPrefix.stop()]);
        }
      }));

    it("starts a new consumer at 'end' or after a position; an existing one resumes from its cursor", () =>
      withStore(makeStore, async (store) => {
        const s = randomStream();
        await appendN(store, s, 4);
        const atEnd = randomConsumer();
        const sub1 = await store.subscribe(atEnd, { from: 'end' });
        assert.equal(sub1.startPosition, 4);
        assert.deepEqual(await nextMessage(sub1[Symbol.asyncIterator]()), { kind: 'caught_up', position: 4 });
        await sub1.close();
        const after2 = randomConsumer();
        const sub2 = await store.subscribe(after2, { from: 2 });
        const m = await nextEvents(sub2[Symbol.asyncIterator]());
        assert.deepEqual(
          m.events.map((e) => e.position),
          [3, 4],
        );
        await sub2.ack(3);
        await sub2.close();
        const again = await store.subscribe(after2, { from: 'start' });
        try {
          assert.equal(again.startPosition, 3);
          assert.deepEqual(
            (await nextEvents(again[Symbol.asyncIterator]())).events.map((e) => e.position),
            [4],
          );
        } finally {
          await again.close();
        }
      }));

    it('redelivers every event after the acknowledged position to the next owner (at least once)', () =>
      withStore(makeStore, async (store) => {
        const s = randomStream();
        await appendN(store, s, 6);
        const name = randomConsumer();
        const sub = await store.subscribe(name, { batchSize: 3 });
        const it = sub[Symbol.asyncIterator]();
        assert.deepEqual(
          (await nextEvents(it)).events.map((e) => e.position),
          [1, 2, 3],
        );
        await sub.ack(2);
        assert.deepEqual(
          (await nextEvents(it)).events.map((e) => e.position),
          [4, 5, 6],
        );
        await sub.close();
        const next = new Reader(await store.subscribe(name));
        try {
          assert.deepEqual(
            (await next.waitForEvents(4)).map((e) => e.position),
            [3, 4, 5, 6],
          );
        } finally {
          await next.stop();
        }
      }));

    it('loses and reorders nothing at the seam while appends race with catch-up', () =>
      withStore(makeStore, async (store) => {
        const names = streams(4, randomCategory());
        await appendRounds(store, names, 50);
        const reader = new Reader(await store.subscribe(randomConsumer(), { batchSize: 7, maxInFlight: 20 }));
        try {
          // Appends run while the reader is still catching up in small batches, and continue after.
          const writers = names.map(async (s) => {
            for (let i = 0; i < 60; i++) await store.append(s, [{ type: 'race', data: i }]);
          });
          await Promise.all(writers);
          const all = await readAllEvents(store);
          await reader.waitForEvents(all.length, 30_000);
          assert.equal(reader.error, null);
          assert.deepEqual(
            reader.positions,
            all.map((e) => e.position),
            'every committed event once, in position order',
          );
          // caught_up may come only after the last batch when the writers kept the reader busy.
          await reader.waitFor(() => reader.messages.some((m) => m.kind === 'caught_up'), 'caught_up');
          assert.equal(reader.messages.filter((m) => m.kind === 'caught_up').length, 1);
          for (const s of names) {
            const versions = reader.events.filter((e) => e.stream === s).map((e) => e.version);
            assert.deepEqual(
              versions,
              Array.from({ length: 110 }, (_, i) => i + 1),
            );
          }
        } finally {
          await reader.stop();
        }
      }));

    it('delivers live appends made through another handle of the same store (polling fallback)', () =>
      withStore(makeStore, async (store, reopen) => {
        const other = await reopen();
        const reader = new Reader(await store.subscribe(randomConsumer()));
        try {
          await reader.waitFor(() => reader.messages.some((m) => m.kind === 'caught_up'), 'caught_up');
          await appendN(other.store, randomStream(), 3);
          assert.equal((await reader.waitForEvents(3)).length, 3);
        } finally {
          await reader.stop();
          await other.cleanup();
        }
      }));
  });
}
