import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { randomConsumer, randomStream } from '../../support/names.js';
import { appendN, nextEvents, nextMessage, rejectsWith, withStore, type MakeStore } from './context.js';

/** Cumulative monotonic acks, and flow control by maxInFlight. */
export function ackTests(makeStore: MakeStore): void {
  describe('acknowledgement and flow control', () => {
    it('moves the cursor forward only; acks at or below it are no-ops', () =>
      withStore(makeStore, async (store) => {
        await appendN(store, randomStream(), 6);
        const name = randomConsumer();
        const sub = await store.subscribe(name);
        try {
          await nextEvents(sub[Symbol.asyncIterator]());
          await sub.ack(4);
          assert.equal((await store.consumers.get(name)).position, 4);
          await sub.ack(2);
          await sub.ack(4);
          assert.equal((await store.consumers.get(name)).position, 4);
          await sub.ack(6);
          assert.equal((await store.consumers.get(name)).position, 6);
        } finally {
          await sub.close();
        }
      }));

    it('refuses an ack beyond what was delivered, and a malformed position', () =>
      withStore(makeStore, async (store) => {
        await appendN(store, randomStream(), 5);
        const name = randomConsumer();
        const sub = await store.subscribe(name, { batchSize: 2 });
        try {
          await nextEvents(sub[Symbol.asyncIterator]());
          const err = await rejectsWith(() => sub.ack(3), 'invalid_input');
          assert.equal(err.details.field, 'position');
          assert.match(err.message, /last delivered or caught-up position \(2\)/);
          await rejectsWith(() => sub.ack(-1), 'invalid_input');
          await rejectsWith(() => sub.ack(1.5), 'invalid_input');
          await rejectsWith(() => sub.ack('2' as unknown as number), 'invalid_input');
          assert.equal((await store.consumers.get(name)).position, 0);
        } finally {
          await sub.close();
        }
      }));

    it('never has more than maxInFlight unacknowledged events, and resumes on ack (nothing dropped)', () =>
      withStore(makeStore, async (store) => {
        await appendN(store, randomStream(), 12);
        const sub = await store.subscribe(randomConsumer(), { maxInFlight: 5, batchSize: 3 });
        const it = sub[Symbol.asyncIterator]();
        try {
          assert.deepEqual(
            (await nextEvents(it)).events.map((e) => e.position),
            [1, 2, 3],
          );
          // Only two more fit under the limit of five.
          assert.deepEqual(
            (await nextEvents(it)).events.map((e) => e.position),
            [4, 5],
          );
          let resolved = false;
          const pending = nextEvents(it).then((m) => {
            resolved = true;
            return m;
          });
          await store.consumers.get(sub.consumer);
          await store.headPosition();
          assert.equal(resolved, false, 'delivery pauses at the limit');
          await sub.ack(2);
          assert.deepEqual(
            (await pending).events.map((e) => e.position),
            [6, 7],
          );
          await sub.ack(7);
          assert.deepEqual(
            (await nextEvents(it)).events.map((e) => e.position),
            [8, 9, 10],
          );
          assert.deepEqual(
            (await nextEvents(it)).events.map((e) => e.position),
            [11, 12],
          );
          assert.deepEqual(await nextMessage(it), { kind: 'caught_up', position: 12 });
        } finally {
          await sub.close();
        }
      }));

    it('refuses bad subscribe options with invalid_input naming the field', () =>
      withStore(makeStore, async (store) => {
        const cases: [unknown, unknown, string][] = [
          ['bad name!', {}, 'consumer'],
          ['', {}, 'consumer'],
          [randomConsumer(), { from: -1 }, 'from'],
          [randomConsumer(), { from: 'middle' }, 'from'],
          [randomConsumer(), { from: 99 }, 'from'],
          [randomConsumer(), { maxInFlight: 0 }, 'maxInFlight'],
          [randomConsumer(), { batchSize: 1.5 }, 'batchSize'],
          [randomConsumer(), { leaseTtlMs: 10 }, 'leaseTtlMs'],
          [randomConsumer(), { filter: { types: 'x' } }, 'filter.types'],
          [randomConsumer(), { filter: { kinds: ['x'] } }, 'filter.kinds'],
        ];
        for (const [name, options, field] of cases) {
          const err = await rejectsWith(
            () => store.subscribe(name as string, options as never),
            'invalid_input',
          );
          assert.equal(err.details.field, field, `field for ${JSON.stringify(options)}`);
        }
        assert.deepEqual(await store.consumers.list(), []);
      }));

    it('ends iteration on close, refuses acks afterwards, and close is idempotent', () =>
      withStore(makeStore, async (store) => {
        await appendN(store, randomStream(), 2);
        const sub = await store.subscribe(randomConsumer());
        const it = sub[Symbol.asyncIterator]();
        await nextEvents(it);
        await sub.close();
        await sub.close();
        assert.equal((await it.next()).done, true);
        await rejectsWith(() => sub.ack(1), 'closed');
      }));
  });
}
