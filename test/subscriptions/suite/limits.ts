import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_PAGE_BYTES } from '../../../src/core/limits.js';
import { randomConsumer, randomStream } from '../../support/names.js';
import { appendN, nextEvents, nextMessage, rejectsWith, withStore, type MakeStore } from './context.js';

const many = (n: number, prefix: string): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

/** Bounds on what a subscriber may ask for, and the operator's forced release of a lease. */
export function limitTests(makeStore: MakeStore): void {
  describe('limits on subscriptions, filters and leases', () => {
    it('refuses leases, batches, in-flight windows and filters outside their bounds, registering nothing', () =>
      withStore(makeStore, async (store) => {
        const cases: [Record<string, unknown>, string][] = [
          [{ leaseTtlMs: 999 }, 'leaseTtlMs'],
          [{ leaseTtlMs: 300_001 }, 'leaseTtlMs'],
          [{ leaseTtlMs: 8.9e15 }, 'leaseTtlMs'],
          [{ batchSize: 5_001 }, 'batchSize'],
          [{ batchSize: 1e9 }, 'batchSize'],
          [{ maxInFlight: 50_001 }, 'maxInFlight'],
          [{ maxInFlight: 1e9 }, 'maxInFlight'],
          [{ filter: { types: many(257, 't') } }, 'filter.types'],
          [{ filter: { types: many(40_000, 't') } }, 'filter.types'],
          [{ filter: { categories: many(257, 'c') } }, 'filter.categories'],
          [{ filter: { streamPrefixes: many(257, 'p') } }, 'filter.streamPrefixes'],
          [{ filter: { types: ['a\u0000b'] } }, 'filter.types[0]'],
          [{ filter: { streamPrefixes: ['ok', 'x\ud83d'] } }, 'filter.streamPrefixes[1]'],
          [{ filter: { categories: ['c'.repeat(201)] } }, 'filter.categories[0]'],
          [{ owner: 'host\u0000:1' }, 'owner'],
        ];
        for (const [options, field] of cases) {
          const err = await rejectsWith(() => store.subscribe(randomConsumer(), options), 'invalid_input');
          assert.equal(err.details.field, field, `field for ${JSON.stringify(options).slice(0, 80)}`);
        }
        assert.deepEqual(await store.consumers.list(), [], 'nothing was registered');
        const bounds = await store.subscribe(randomConsumer(), {
          leaseTtlMs: 300_000,
          batchSize: 5_000,
          maxInFlight: 50_000,
          filter: { types: many(256, 't') },
        });
        await bounds.close();
        const shortest = await store.subscribe(randomConsumer(), { leaseTtlMs: 1_000 });
        await shortest.close();
      }));

    it('ends a delivered page early at the byte bound, with at least one event in it', () =>
      withStore(makeStore, async (store) => {
        const stream = randomStream();
        // 600 KB each: six fit in a page of MAX_PAGE_BYTES (4 MiB), the seventh would pass it.
        const big = 'x'.repeat(600_000);
        for (let i = 0; i < 10; i++) await store.append(stream, [{ type: 'big', data: { i, big } }]);
        const perPage = Math.floor(MAX_PAGE_BYTES / (600_000 + 20));
        const sub = await store.subscribe(randomConsumer(), { batchSize: 100, maxInFlight: 100 });
        try {
          const it = sub[Symbol.asyncIterator]();
          const sizes: number[] = [];
          let seen = 0;
          while (seen < 10) {
            const batch = await nextEvents(it);
            sizes.push(batch.events.length);
            seen += batch.events.length;
            await sub.ack(batch.events[batch.events.length - 1]!.position);
          }
          assert.equal(seen, 10);
          assert.ok(
            sizes.every((n) => n >= 1 && n <= perPage),
            `pages of ${sizes.join(', ')} events`,
          );
          assert.equal(sizes[0], perPage, 'the first page is cut at the bound, not at batchSize');
        } finally {
          await sub.close();
        }
      }));

    it('releases a lease on an operator’s demand: the owner is fenced and another subscriber takes over at once', () =>
      withStore(makeStore, async (store, reopen) => {
        const other = await reopen();
        const name = randomConsumer();
        await appendN(store, randomStream(), 2);
        const owner = await store.subscribe(name, { owner: 'gone-away', leaseTtlMs: 300_000 });
        try {
          const it = owner[Symbol.asyncIterator]();
          await nextEvents(it);
          await rejectsWith(() => other.store.subscribe(name), 'consumer_busy');
          await rejectsWith(() => other.store.consumers.reset(name, 0), 'consumer_busy');
          await other.store.consumers.release(name);
          const released = await other.store.consumers.get(name);
          assert.equal(released.owner, null);
          assert.equal(released.leaseExpiresAt, null);
          assert.equal(released.status, 'stopped');
          assert.equal(released.epoch, owner.epoch + 1, 'the epoch moves on, fencing the old owner');
          await rejectsWith(() => owner.ack(2), 'fenced');
          const next = await other.store.subscribe(name);
          assert.ok(next.epoch > released.epoch);
          await next.close();
          // Without an owner a release changes nothing.
          const before = await other.store.consumers.get(name);
          await other.store.consumers.release(name);
          assert.equal((await other.store.consumers.get(name)).epoch, before.epoch);
          await rejectsWith(() => other.store.consumers.release(randomConsumer()), 'not_found');
          await rejectsWith(() => other.store.consumers.release('bad name'), 'invalid_input');
        } finally {
          await owner.close().catch(() => undefined);
          await other.cleanup();
        }
      }));

    it('refuses dead-letter selectors that are not event ids, and names with control characters', () =>
      withStore(makeStore, async (store) => {
        const name = randomConsumer();
        await (await store.subscribe(name)).close();
        for (const id of ['a\u0000b', 'not-a-uuid', '']) {
          const err = await rejectsWith(() => store.deadLetters.retry(name, { id }), 'invalid_input');
          assert.match(String(err.details.field), /id/);
        }
        await rejectsWith(() => store.deadLetters.skip(name, { stream: 'inv-\u00001' }), 'invalid_input');
        await rejectsWith(
          () => store.deadLetters.skip(name, { stream: 'inv-1' }, { by: 'ops\u0000' }),
          'invalid_input',
        );
        assert.equal(await store.deadLetters.retry(name, { id: '00000000-0000-7000-8000-000000000000' }), 0);
        const sub = await store.subscribe(name);
        try {
          assert.equal((await nextMessage(sub[Symbol.asyncIterator]())).kind, 'caught_up');
        } finally {
          await sub.close();
        }
      }));
  });
}
