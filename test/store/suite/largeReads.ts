import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventStore } from '../../../src/core/eventStore.js';
import { bySpeed } from '../../support/fast.js';
import { randomStream } from '../../support/names.js';
import { events, withStore, type MakeStore } from './context.js';

export interface LargeReadOptions {
  /** How many events the large-read tests write (at most 2000 in `npm run test:fast`). @default 20000 */
  largeReadEvents?: number;
}

async function fill(store: EventStore, stream: string, total: number): Promise<void> {
  for (let done = 0; done < total; done += 5000) {
    await store.append(stream, events(Math.min(5000, total - done), 'bulk', done));
  }
}

export function largeReadTests(
  make: MakeStore,
  { largeReadEvents: full = 20_000 }: LargeReadOptions = {},
): void {
  // Still several pages of every store's default page size (500) in the inner loop.
  const largeReadEvents = bySpeed(full, Math.min(full, 2_000));
  describe('large reads', () => {
    it(`readAll and readStream yield ${largeReadEvents} events in order`, () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        await fill(store, stream, largeReadEvents);
        let expected = 1;
        for await (const e of store.readAll()) {
          assert.equal(e.position, expected, 'readAll positions are contiguous from 1');
          assert.equal((e.data as { i: number }).i, expected - 1);
          expected++;
        }
        assert.equal(expected - 1, largeReadEvents);
        expected = 1;
        for await (const e of store.readStream(stream)) {
          if (e.version !== expected)
            assert.equal(e.version, expected, 'readStream versions are contiguous from 1');
          expected++;
        }
        assert.equal(expected - 1, largeReadEvents);
      }));

    it('an open read does not block appends, and stopping a read early releases it', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        await fill(store, stream, largeReadEvents);
        // Pause a readAll part-way, write, then carry on: a store that held its whole result in one
        // open cursor on the write connection could not accept the append in between.
        const reader = store.readAll()[Symbol.asyncIterator]();
        const seen: number[] = [];
        for (let i = 0; i < 100; i++) {
          const r = await reader.next();
          assert.ok(!r.done);
          seen.push(r.value.position);
        }
        const other = randomStream();
        const appended = await store.append(other, events(3));
        assert.equal(appended.firstPosition, largeReadEvents + 1);
        const streamReader = store.readStream(stream)[Symbol.asyncIterator]();
        const firstOfStream = await streamReader.next();
        assert.equal(firstOfStream.done ? undefined : firstOfStream.value.version, 1);
        await store.append(other, events(1));
        await streamReader.return?.();
        for (;;) {
          const r = await reader.next();
          if (r.done) break;
          seen.push(r.value.position);
        }
        const firstPart = seen.slice(0, largeReadEvents);
        assert.equal(
          firstPart.length,
          largeReadEvents,
          'the paused read still yields every event that was there',
        );
        assert.ok(
          firstPart.every((p, i) => p === i + 1),
          'in order, without gaps or repeats',
        );
        assert.ok(
          seen.slice(largeReadEvents).every((p, i) => p === largeReadEvents + 1 + i),
          'events appended during the read, if yielded, follow in order',
        );
        // Stopping early (break) must release the read; the store stays usable.
        let n = 0;
        for await (const _e of store.readAll()) if (++n === 10) break;
        for await (const _e of store.readStream(stream, { fromVersion: 5000 })) if (++n === 20) break;
        const last = await store.append(other, events(1));
        assert.equal(last.lastPosition, largeReadEvents + 5);
        assert.equal(await store.headPosition(), largeReadEvents + 5);
      }));
  });
}
