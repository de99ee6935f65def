import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SubscriptionMessage } from '../../../src/core/subscription.js';
import { randomConsumer, randomStream } from '../../support/names.js';
import { until } from '../../support/until.js';
import { appendN, nextEvents, nextMessage, rejectsWith, withStore, type MakeStore } from './context.js';

type Paused = Extract<SubscriptionMessage, { kind: 'paused' }>;

function asPaused(m: SubscriptionMessage): Paused {
  if (m.kind !== 'paused') assert.fail(`expected a paused message, got ${m.kind}`);
  return m;
}

/** `consumers.pause` / `resume`: delivery holds, the cursor stays, the pause is stored. */
export function pausingTests(makeStore: MakeStore): void {
  describe('pause and resume', () => {
    it('holds delivery while paused, acks what is in flight, and resumes at the cursor', () =>
      withStore(makeStore, async (store) => {
        const stream = randomStream();
        await appendN(store, stream, 3);
        const name = randomConsumer();
        const sub = await store.subscribe(name, { batchSize: 3 });
        const it = sub[Symbol.asyncIterator]();
        try {
          const first = await nextEvents(it);
          assert.deepEqual(
            first.events.map((e) => e.version),
            [1, 2, 3],
          );
          await store.consumers.pause(name, { by: 'ops test' });
          // The batch in flight still commits: its ack moves the cursor.
          await sub.ack(first.events[2]!.position);
          await appendN(store, stream, 2);
          let m = await nextMessage(it);
          if (m.kind === 'caught_up') m = await nextMessage(it);
          const paused = asPaused(m);
          assert.equal(paused.pause?.reason, 'operator');
          assert.match(paused.pause?.by ?? '', /ops test/);
          const info = await store.consumers.get(name);
          assert.equal(info.status, 'paused');
          assert.equal(info.position, first.events[2]!.position, 'the cursor stays');
          assert.equal(info.lag, 2);
          assert.equal(info.pause?.reason, 'operator');
          assert.ok(Date.parse(info.pause?.since ?? '') > 0);
          assert.equal((await store.consumers.list()).find((c) => c.name === name)?.status, 'paused');
          await store.consumers.resume(name);
          // The next message after the pause says it ended: nothing was delivered meanwhile.
          assert.equal(asPaused(await nextMessage(it)).pause, null);
          const rest = await nextEvents(it);
          assert.deepEqual(
            rest.events.map((e) => e.version),
            [4, 5],
          );
          await sub.ack(rest.events[1]!.position);
          const after = await store.consumers.get(name);
          assert.equal(after.pause, null);
          assert.notEqual(after.status, 'paused');
        } finally {
          await sub.close();
        }
      }));

    it('is stored: a later owner starts paused and receives nothing until resumed', () =>
      withStore(makeStore, async (store, reopen) => {
        const stream = randomStream();
        await appendN(store, stream, 2);
        const name = randomConsumer();
        await (await store.subscribe(name)).close();
        await store.consumers.pause(name);
        const stopped = await store.consumers.get(name);
        assert.equal(stopped.status, 'paused', 'paused wins over stopped');
        const other = await reopen();
        try {
          assert.equal((await other.store.consumers.get(name)).status, 'paused');
          const sub = await other.store.subscribe(name, { leaseTtlMs: 1000 });
          const it = sub[Symbol.asyncIterator]();
          try {
            assert.equal(asPaused(await nextMessage(it)).pause?.reason, 'operator');
            await store.consumers.resume(name);
            // The owner sees the resume at once in-process, or at its next lease renewal.
            assert.equal(asPaused(await nextMessage(it)).pause, null);
            const events = await nextEvents(it);
            assert.deepEqual(
              events.events.map((e) => e.version),
              [1, 2],
            );
          } finally {
            await sub.close();
          }
        } finally {
          await other.cleanup();
        }
      }));

    it('reaches an owner through another handle of the store at its next lease renewal', () =>
      withStore(makeStore, async (store, reopen) => {
        const stream = randomStream();
        const name = randomConsumer();
        const sub = await store.subscribe(name, { leaseTtlMs: 1000 });
        const it = sub[Symbol.asyncIterator]();
        const other = await reopen();
        try {
          assert.equal((await nextMessage(it)).kind, 'caught_up');
          await other.store.consumers.pause(name);
          assert.equal(asPaused(await nextMessage(it)).pause?.reason, 'operator');
          await appendN(store, stream, 1);
          await other.store.consumers.resume(name);
          assert.equal(asPaused(await nextMessage(it)).pause, null);
          assert.equal((await nextEvents(it)).events[0]!.stream, stream);
        } finally {
          await sub.close();
          await other.cleanup();
        }
      }));

    it('pausing twice keeps the first pause; resuming a running consumer changes nothing', () =>
      withStore(makeStore, async (store) => {
        const name = randomConsumer();
        await (await store.subscribe(name)).close();
        await store.consumers.resume(name);
        assert.equal((await store.consumers.get(name)).pause, null);
        await store.consumers.pause(name, { by: 'first' });
        const once = (await store.consumers.get(name)).pause;
        await store.consumers.pause(name, { by: 'second' });
        assert.deepEqual((await store.consumers.get(name)).pause, once);
        await store.consumers.resume(name);
        await until(async () => (await store.consumers.get(name)).status === 'stopped');
      }));

    it('refuses a missing consumer (not_found) and bad input (invalid_input)', () =>
      withStore(makeStore, async (store) => {
        await rejectsWith(() => store.consumers.pause(randomConsumer()), 'not_found');
        await rejectsWith(() => store.consumers.resume(randomConsumer()), 'not_found');
        await rejectsWith(() => store.consumers.pause('no spaces allowed'), 'invalid_input');
        const name = randomConsumer();
        await (await store.subscribe(name)).close();
        await rejectsWith(
          () => store.consumers.pause(name, { by: 'x', extra: 1 } as unknown as { by: string }),
          'invalid_input',
        );
      }));
  });
}
