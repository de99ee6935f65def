import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DeadLetterBulkResult } from '../../../src/core/subscription.js';
import type { EventStore } from '../../../src/core/eventStore.js';
import { randomCategory, randomConsumer } from '../../support/names.js';
import { until } from '../../support/until.js';
import { nextMessage, Reader, rejectsWith, withStore, type MakeStore } from './context.js';

class CodedError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

/**
 * `count` entities of two events each, the first of each dead-lettered (the second parks behind
 * it): entity i fails with code ECONNREFUSED when i is even, with "card declined" otherwise.
 * Returns the streams in name order.
 */
async function parkedEntities(store: EventStore, name: string, count: number): Promise<string[]> {
  const cat = randomCategory();
  const streams = Array.from({ length: count }, (_, i) => `${cat}-${String(i).padStart(4, '0')}`);
  for (const s of streams) await store.append(s, [{ type: 'step', data: { v: 1 } }]);
  for (const s of streams) await store.append(s, [{ type: 'step', data: { v: 2 } }]);
  const sub = await store.subscribe(name, { batchSize: 2 * count, maxInFlight: 2 * count });
  const it = sub[Symbol.asyncIterator]();
  try {
    let last = 0;
    for (;;) {
      const m = await nextMessage(it);
      if (m.kind !== 'events') break;
      for (const e of m.events) {
        last = e.position;
        if (e.version !== 1) continue;
        const i = streams.indexOf(e.stream);
        const error =
          i % 2 === 0
            ? new CodedError('connect failed', 'ECONNREFUSED')
            : new Error('card declined by issuer');
        await sub.park(e.position, { reason: 'handler failed', error, attempts: 3 });
      }
      await sub.ack(last);
    }
  } finally {
    await sub.close();
  }
  return streams;
}

/** `deadLetters.retryMany` / `skipMany`: many entities at once, by error, with a limit, in pages. */
export function bulkDeadLetterTests(makeStore: MakeStore): void {
  describe('dead letters in bulk', () => {
    it('retries the entities whose error code matches, each in order, and skips all the others', () =>
      withStore(makeStore, async (store) => {
        const name = randomConsumer();
        const streams = await parkedEntities(store, name, 6);
        assert.equal((await store.consumers.get(name)).parked, 12);
        const letters = await store.deadLetters.list(name);
        assert.equal(letters.find((l) => l.error?.message === 'connect failed')?.error?.code, 'ECONNREFUSED');
        const retried = await store.deadLetters.retryMany(name, { error: 'ECONNREFUSED' });
        assert.deepEqual(retried, { entities: 3, events: 6, last: streams[4], done: true });
        const reader = new Reader(await store.subscribe(name));
        try {
          const again = await reader.waitForEvents(6);
          assert.ok(reader.messages.every((m) => m.kind !== 'events' || m.redelivery));
          for (const s of [streams[0], streams[2], streams[4]]) {
            assert.deepEqual(
              again.filter((e) => e.stream === s).map((e) => e.version),
              [1, 2],
              `${s} redelivered in order`,
            );
          }
          await reader.waitFor(() => reader.positions.length === 6, 'the redelivered events received');
          // Received is not yet acknowledged (over a socket the ack travels on its own): wait until the
          // store has resolved the six retried dead letters, so closing cannot lose an ack.
          await until(async () => (await store.deadLetters.list(name)).length === 6, {
            message: 'the six retried dead letters resolved by their acks',
          });
        } finally {
          await reader.stop();
        }
        // By message text: the other three.
        const skipped = await store.deadLetters.skipMany(name, { error: 'card declined', by: 'alice' });
        assert.equal(skipped.entities, 3);
        assert.equal(skipped.events, 6);
        const all = await store.deadLetters.list(name, { all: true });
        assert.ok(all.filter((l) => l.status === 'skipped').every((l) => l.skippedBy?.includes('alice')));
        assert.equal((await store.deadLetters.list(name)).length, 0);
      }));

    it('stops at the limit and goes on after the last entity, reporting progress per page', () =>
      withStore(makeStore, async (store) => {
        const name = randomConsumer();
        const streams = await parkedEntities(store, name, 5);
        const progress: DeadLetterBulkResult[] = [];
        const first = await store.deadLetters.retryMany(name, {
          limit: 2,
          onProgress: (p) => progress.push(p),
        });
        assert.deepEqual(first, { entities: 2, events: 4, last: streams[1], done: false });
        assert.deepEqual(progress.at(-1), { entities: 2, events: 4, last: streams[1], done: false });
        const rest = await store.deadLetters.skipMany(name, { after: String(first.last), by: 'bob' });
        assert.deepEqual(rest, { entities: 3, events: 6, last: streams[4], done: true });
        const active = await store.deadLetters.list(name);
        assert.deepEqual(
          [...new Set(active.map((l) => l.event.stream))],
          [streams[0], streams[1]],
          'only the retried entities are still active',
        );
        assert.ok(active.every((l) => l.status === 'retrying'));
        const none = await store.deadLetters.retryMany(name, { error: 'no such error' });
        assert.deepEqual(none, { entities: 0, events: 0, last: null, done: true });
      }));

    it('refuses a bad limit, error or cursor, and a missing consumer', () =>
      withStore(makeStore, async (store) => {
        const name = randomConsumer();
        await (await store.subscribe(name)).close();
        await rejectsWith(() => store.deadLetters.retryMany(name, { limit: 0 }), 'invalid_input');
        await rejectsWith(() => store.deadLetters.retryMany(name, { limit: 1e12 }), 'invalid_input');
        await rejectsWith(() => store.deadLetters.skipMany(name, { error: '' }), 'invalid_input');
        await rejectsWith(() => store.deadLetters.retryMany(name, { after: '' }), 'invalid_input');
        await rejectsWith(() => store.deadLetters.retryMany(randomConsumer()), 'not_found');
      }));
  });
}
