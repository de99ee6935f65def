import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { randomStream, randomConsumer } from '../../support/names.js';
import { until } from '../../support/until.js';
import { appendN, nextEvents, Reader, rejectsWith, withStore, type MakeStore } from './context.js';

/** `ParkInfo.redrive`: a dead letter retried by the engine itself, with growing delays, at most `max` times. */
export function redriveTests(makeStore: MakeStore): void {
  describe('automatic redrive', () => {
    it('redelivers a dead-lettered entity by itself, in order, counting redrives up to max', () =>
      withStore(makeStore, async (store) => {
        const stream = randomStream();
        await appendN(store, stream, 2);
        const name = randomConsumer();
        const redrive = { afterMs: 100, factor: 1, max: 2 };
        const reader = new Reader(await store.subscribe(name, { batchSize: 2 }), false);
        try {
          const first = (await reader.waitForEvents(2))[0]!;
          await reader.sub.park(first.position, { reason: 'failed', error: { message: 'down' }, redrive });
          await reader.sub.ack(first.position + 1);
          // Parked with a redrive due shortly (it may have happened already on a slow machine).
          const parked = await store.deadLetters.list(name);
          assert.deepEqual(
            parked.map((l) => l.event.version),
            [1, 2],
          );
          const head = parked[0]!;
          assert.ok(head.redrives === 0 ? head.redriveAt !== null : head.status === 'retrying');
          assert.equal(parked[1]!.redriveAt, null, 'the successor waits behind, with no redrive of its own');
          // Each redrive delivers the entity again, in order; failing again schedules the next one.
          const redelivered = (): number[] =>
            reader.messages
              .flatMap((m) => (m.kind === 'events' && m.redelivery ? m.events : []))
              .map((e) => e.version);
          for (let n = 1; n <= 2; n++) {
            await reader.waitFor(() => redelivered().length >= 2 * n, `redrive ${n}`);
            assert.deepEqual(redelivered(), n === 1 ? [1, 2] : [1, 2, 1, 2], 'each redrive in order');
            const head = (await store.deadLetters.list(name))[0]!;
            assert.equal(head.redrives, n);
            assert.equal(head.status, 'retrying');
            await reader.sub.park(first.position, {
              reason: 'failed again',
              error: { message: 'down' },
              redrive,
            });
          }
          const last = (await store.deadLetters.list(name))[0]!;
          assert.equal(last.redrives, 2);
          assert.equal(last.redriveAt, null, 'no redrive after max');
          assert.equal(last.status, 'parked');
        } finally {
          await reader.stop();
        }
      }));

    it('an entity whose redrive succeeds is resolved and its later events flow again', () =>
      withStore(makeStore, async (store) => {
        const stream = randomStream();
        await appendN(store, stream, 1);
        const name = randomConsumer();
        const sub = await store.subscribe(name);
        const it = sub[Symbol.asyncIterator]();
        try {
          const first = (await nextEvents(it)).events[0]!;
          await sub.park(first.position, {
            reason: 'failed',
            redrive: { afterMs: 100, factor: 2, max: 3 },
          });
          await appendN(store, stream, 1);
          const again = await nextEvents(it);
          assert.equal(again.redelivery, true);
          assert.deepEqual(
            again.events.map((e) => e.version),
            [1, 2],
          );
          await sub.ack(again.events[1]!.position);
          await until(async () => (await store.deadLetters.list(name)).length === 0);
          const resolved = await store.deadLetters.list(name, { all: true });
          assert.deepEqual(
            resolved.map((l) => [l.status, l.redrives]),
            [
              ['resolved', 1],
              ['resolved', 0],
            ],
          );
        } finally {
          await sub.close();
        }
      }));

    it('refuses a redrive policy outside its bounds', () =>
      withStore(makeStore, async (store) => {
        await appendN(store, randomStream(), 1);
        const sub = await store.subscribe(randomConsumer());
        const it = sub[Symbol.asyncIterator]();
        try {
          const e = (await nextEvents(it)).events[0]!;
          for (const redrive of [
            { afterMs: 10, factor: 2, max: 1 },
            { afterMs: 1000, factor: 11, max: 1 },
            { afterMs: 1000, factor: 2, max: 101 },
            { afterMs: 1000, factor: 2, max: 1, extra: 1 },
          ]) {
            await rejectsWith(() => sub.park(e.position, { reason: 'x', redrive }), 'invalid_input');
          }
        } finally {
          await sub.close();
        }
      }));
  });
}
