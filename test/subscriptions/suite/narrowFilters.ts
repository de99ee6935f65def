import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventStore } from '../../../src/core/eventStore.js';
import { matchesFilter, type EventFilter } from '../../../src/core/filter.js';
import type { SubscriptionMessage } from '../../../src/core/subscription.js';
import { randomConsumer, randomStream } from '../../support/names.js';
import { until } from '../../support/until.js';
import {
  appendN,
  nextEvents,
  nextMessage,
  readAllEvents,
  Reader,
  withStore,
  type MakeStore,
} from './context.js';

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

    it("an idle subscription's stored cursor follows thousands of left-out events another handle appends", () =>
      withStore(makeStore, async (store, reopen) => {
        await appendN(store, randomStream('other'), 3);
        const name = randomConsumer();
        const reader = new Reader(
          await store.subscribe(name, { filter: { streamPrefixes: ['zz-nothing-'] } }),
        );
        const other = await reopen();
        try {
          await reader.waitFor(() => caughtUpAt(reader) === 3, 'caught_up at 3');
          // 12,000: whatever the first move of the cursor at a polling tick, the log then runs 5,000
          // positions (what a cursor may trail its read position by) or more past it, or it is past 5,000.
          const stream = randomStream('other');
          for (let i = 0; i < 24; i++) {
            const events = Array.from({ length: 500 }, (_, j) => ({ type: 'thing.happened', data: { j } }));
            await other.store.append(stream, events);
          }
          const info = await until(
            async () => {
              const c = await store.consumers.get(name);
              return c.position >= 5_000 ? c : null;
            },
            { message: `the cursor of ${name} past 5,000` },
          );
          assert.equal(info.lag, 0);
          assert.deepEqual(reader.events, []);
        } finally {
          await other.cleanup();
          await reader.stop();
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

    it('idle narrow subscriptions each get exactly their events, appended here and by another handle', () =>
      withStore(makeStore, async (store, reopen) => {
        await appendN(store, randomStream('other'), 10);
        const mine = Array.from({ length: 8 }, (_, i) => randomStream(`n${i}x`));
        const readers: Reader[] = [];
        try {
          for (const stream of mine) {
            const filter = { streamPrefixes: [stream] };
            readers.push(new Reader(await store.subscribe(randomConsumer(), { filter })));
          }
          for (const r of readers) await r.waitFor(() => caughtUpAt(r) === 10, 'caught_up at 10');
          const other = await reopen();
          try {
            // Mostly events no subscription wants, between the ones each wants, from both handles.
            const expected: number[][] = mine.map(() => []);
            for (let round = 0; round < 4; round++) {
              for (const [i, stream] of mine.entries()) {
                const by = (i + round) % 2 === 0 ? store : other.store;
                await appendN(by, randomStream('other'), 3);
                if ((i + round) % 3 === 0) expected[i]!.push(...(await appendN(by, stream, 2)));
              }
            }
            for (const [i, r] of readers.entries()) {
              await r.waitForEvents(expected[i]!.length);
              assert.deepEqual(r.positions, expected[i], `subscription ${i}`);
            }
          } finally {
            await other.cleanup();
          }
        } finally {
          for (const r of readers) await r.stop();
        }
      }));

    it('listing many consumers gives each the lag it has alone, matching or not', () =>
      withStore(makeStore, async (store) => {
        const a = randomStream('lagA');
        const b = randomStream('lagB');
        for (let i = 0; i < 6; i++) {
          await appendN(store, randomStream('other'), 4);
          await appendN(store, i % 2 === 0 ? a : b, 1, i % 3 === 0 ? 'x.done' : 'thing.happened');
        }
        const head = await store.headPosition();
        const filters: EventFilter[] = [
          { streamPrefixes: [a] },
          { streamPrefixes: [b], types: ['x.done'] },
          { categories: [a.split('-')[0]!] },
          { types: ['x.done'] },
          { partition: { count: 3, index: 1 } },
          {},
          // Twelve that match nothing: enough consumers at one place for one shared read.
          ...Array.from({ length: 12 }, (_, i) => ({ streamPrefixes: [`zz${i}-`] })),
        ];
        const names: string[] = [];
        for (const [i, filter] of filters.entries()) {
          const name = randomConsumer();
          names.push(name);
          await (await store.subscribe(name, { filter, from: [0, 3, 7][i % 3]! })).close();
        }
        const events = await readAllEvents(store);
        const listed = new Map((await store.consumers.list()).map((c) => [c.name, c]));
        const lagOf = (position: number, filter: EventFilter | undefined) =>
          events.filter((e) => e.position > position && matchesFilter(filter, e)).length;
        for (const [i, name] of names.entries()) {
          const info = listed.get(name)!;
          const alone = await store.consumers.get(name);
          const group = filters[i]!.partition;
          if (group) {
            // A partition filter makes a group: each partition has its own lag.
            for (const p of info.partitions!) {
              const lag = lagOf(p.position, { partition: { count: group.count, index: p.index } });
              assert.equal(p.lag, lag, `consumer ${i}, partition ${p.index}`);
              assert.equal(alone.partitions![p.index]!.lag, lag, `consumer ${i} alone, partition ${p.index}`);
            }
            continue;
          }
          const lag = lagOf(info.position, filters[i]);
          assert.equal(info.lag, lag, `consumer ${i} (from ${info.position}) of ${head}`);
          assert.equal(alone.lag, lag, `consumer ${i} alone`);
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
