import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventStore } from '../../../src/core/eventStore.js';
import type { SubscriptionMessage } from '../../../src/core/subscription.js';
import { randomConsumer, randomStream } from '../../support/names.js';
import { until } from '../../support/until.js';
import { appendN, nextEvents, nextMessage, Reader, withStore, type MakeStore } from './context.js';

/** The next `caught_up` message (skipping events). */
async function nextCaughtUp(it: AsyncIterator<SubscriptionMessage>): Promise<number> {
  for (;;) {
    const m = await nextMessage(it);
    if (m.kind === 'caught_up') return m.position;
  }
}

/** The position of the last `caught_up` message the reader got, or -1. */
function caughtUpAt(reader: Reader): number {
  const m = reader.messages.findLast((x) => x.kind === 'caught_up');
  return m?.kind === 'caught_up' ? m.position : -1;
}

/** Waits until the stored cursor of `name` is at the head, and returns its admin view then. */
async function untilAtHead(store: EventStore, name: string) {
  return until(
    async () => {
      const info = await store.consumers.get(name);
      return info.position === (await store.headPosition()) ? info : null;
    },
    { message: `the cursor of ${name} at the head` },
  );
}

/** Filters that exclude events: the read position and the stored cursor move past what they leave out. */
export function narrowFilterTests(makeStore: MakeStore): void {
  describe('narrow filters', () => {
    it('a subscription whose filter matches nothing reads to the head once: its cursor is the head, lag 0', () =>
      withStore(makeStore, async (store) => {
        await appendN(store, randomStream('other'), 30);
        const name = randomConsumer();
        const reader = new Reader(
          await store.subscribe(name, { filter: { streamPrefixes: ['zz-nothing-'] } }),
        );
        try {
          await reader.waitFor(() => caughtUpAt(reader) === 30, 'caught_up at 30');
          const info = await untilAtHead(store, name);
          assert.equal(info.lag, 0);
          assert.equal(info.status, 'idle');
          // Events it leaves out that arrive while it waits count no lag.
          await appendN(store, randomStream('other'), 5);
          assert.equal((await store.consumers.get(name)).lag, 0);
          assert.deepEqual(reader.events, []);
        } finally {
          await reader.stop();
        }
        // A new owner starts after what the filter left out.
        const again = await store.subscribe(name, { filter: { streamPrefixes: ['zz-nothing-'] } });
        try {
          assert.ok(again.startPosition >= 30, `starts at ${again.startPosition}`);
        } finally {
          await again.close();
        }
      }));

    it('a narrow consumer may acknowledge up to the caught_up position, and then shows lag 0', () =>
      withStore(makeStore, async (store) => {
        const mine = randomStream('mine');
        await appendN(store, mine, 2);
        await appendN(store, randomStream('other'), 6);
        const name = randomConsumer();
        const sub = await store.subscribe(name, { filter: { categories: ['mine'] } });
        try {
          const it = sub[Symbol.asyncIterator]();
          const batch = await nextEvents(it);
          assert.deepEqual(
            batch.events.map((e) => e.position),
            [1, 2],
          );
          const position = await nextCaughtUp(it);
          assert.equal(position, 8);
          // Everything delivered is handled; the rest up to the caught-up position is left out.
          await sub.ack(position);
          const info = await store.consumers.get(name);
          assert.equal(info.position, 8);
          assert.equal(info.lag, 0);
          await assert.rejects(sub.ack(9), { code: 'invalid_input' });
        } finally {
          await sub.close();
        }
      }));

    it('the cursor does not pass a delivered event that is not acknowledged', () =>
      withStore(makeStore, async (store) => {
        const mine = randomStream('mine');
        await appendN(store, mine, 1);
        await appendN(store, randomStream('other'), 4);
        const name = randomConsumer();
        const reader = new Reader(await store.subscribe(name, { filter: { categories: ['mine'] } }), false);
        try {
          await reader.waitFor(() => caughtUpAt(reader) === 5, 'caught_up at 5');
          await appendN(store, randomStream('other'), 3);
          assert.deepEqual(reader.positions, [1]);
          assert.equal((await store.consumers.get(name)).position, 0);
          // The ack of the one delivered event lets the cursor move on to the head.
          await reader.sub.ack(1);
          assert.equal((await untilAtHead(store, name)).lag, 0);
        } finally {
          await reader.stop();
        }
      }));
  });
}
