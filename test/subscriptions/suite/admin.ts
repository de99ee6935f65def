import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { randomCategory, randomConsumer, randomStream } from '../../support/names.js';
import { until } from '../../support/until.js';
import { appendN, nextEvents, Reader, rejectsWith, withStore, type MakeStore } from './context.js';

/** The consumer registry and its admin operations. */
export function adminTests(makeStore: MakeStore): void {
  describe('consumer admin', () => {
    it('lists and shows consumers with filter, cursor, head, lag, status, owner and times', () =>
      withStore(makeStore, async (store) => {
        const cat = randomCategory();
        await appendN(store, `${cat}-1`, 3);
        await appendN(store, randomStream('other'), 2);
        const name = randomConsumer();
        const sub = await store.subscribe(name, {
          filter: { categories: [cat] },
          owner: 'host:1',
          batchSize: 1,
        });
        try {
          let info = await store.consumers.get(name);
          assert.equal(info.name, name);
          assert.deepEqual(info.filter, { categories: [cat] });
          assert.equal(info.position, 0);
          assert.equal(info.head, 5);
          assert.equal(info.lag, 3, 'lag counts matching events only');
          assert.ok(info.lagSeconds >= 0);
          assert.equal(info.status, 'running');
          assert.equal(info.owner, 'host:1');
          assert.equal(info.epoch, sub.epoch);
          assert.ok(info.leaseExpiresAt !== null && Date.parse(info.leaseExpiresAt) > Date.now());
          assert.equal(info.lastError, null);
          assert.equal(info.parked, 0);
          assert.ok(Date.parse(info.createdAt) <= Date.parse(info.updatedAt));
          const it = sub[Symbol.asyncIterator]();
          for (let i = 0; i < 3; i++) await sub.ack((await nextEvents(it)).events[0]!.position);
          info = await store.consumers.get(name);
          assert.equal(info.position, 3);
          assert.equal(info.lag, 0);
          assert.equal(info.lagSeconds, 0);
          assert.equal(info.status, 'idle');
          assert.deepEqual(
            (await store.consumers.list()).map((c) => c.name),
            [name],
          );
        } finally {
          await sub.close();
        }
        const stopped = await store.consumers.get(name);
        assert.equal(stopped.status, 'stopped');
        assert.equal(stopped.owner, null);
        assert.equal(stopped.leaseExpiresAt, null);
      }));

    it('reports lag in seconds since the oldest unacknowledged matching event', () =>
      withStore(makeStore, async (store) => {
        const name = randomConsumer();
        await (await store.subscribe(name)).close();
        await appendN(store, randomStream(), 2);
        const info = await until(async () => {
          const i = await store.consumers.get(name);
          return i.lagSeconds > 0 ? i : null;
        });
        assert.equal(info.lag, 2);
        assert.equal(info.status, 'stopped');
      }));

    it('resets the cursor back or forward only while nobody owns the consumer', () =>
      withStore(makeStore, async (store) => {
        await appendN(store, randomStream(), 5);
        const name = randomConsumer();
        const reader = new Reader(await store.subscribe(name));
        await reader.waitForEvents(5);
        await until(async () => (await store.consumers.get(name)).position === 5);
        const busy = await rejectsWith(() => store.consumers.reset(name, 1), 'consumer_busy');
        assert.match(busy.message, /standby/);
        await rejectsWith(() => store.consumers.delete(name), 'consumer_busy');
        await reader.stop();
        await store.consumers.reset(name, 2);
        assert.equal((await store.consumers.get(name)).position, 2);
        const again = new Reader(await store.subscribe(name));
        try {
          assert.deepEqual(
            (await again.waitForEvents(3)).map((e) => e.position),
            [3, 4, 5],
          );
        } finally {
          await again.stop();
        }
        await store.consumers.reset(name, 5);
        assert.equal((await store.consumers.get(name)).lag, 0);
        assert.equal(
          (await rejectsWith(() => store.consumers.reset(name, 6), 'invalid_input')).details.field,
          'position',
        );
        await rejectsWith(() => store.consumers.reset(name, -1), 'invalid_input');
      }));

    it('refuses a reset below the recorded ledger horizon, naming it; delete forgets the horizon', () =>
      withStore(makeStore, async (store) => {
        await appendN(store, randomStream(), 6);
        const name = randomConsumer();
        const sub = await store.subscribe(name);
        await nextEvents(sub[Symbol.asyncIterator]());
        await sub.ack(6);
        await sub.close();
        assert.equal(
          typeof store.consumers.setLedgerHorizon,
          'function',
          'the store records ledger horizons',
        );
        await store.consumers.setLedgerHorizon?.(name, 4);
        const refused = await rejectsWith(() => store.consumers.reset(name, 3), 'invalid_input');
        assert.equal(refused.details.field, 'position');
        assert.match(refused.message, /at least 4 .*through position 4.*new consumer version/);
        await store.consumers.reset(name, 4);
        assert.equal((await store.consumers.get(name)).position, 4);
        await store.consumers.delete(name);
        const again = await store.subscribe(name);
        await again.close();
        await store.consumers.reset(name, 0);
      }));

    it('deletes a consumer with its cursor and dead letters; the name can then start afresh', () =>
      withStore(makeStore, async (store) => {
        await appendN(store, randomStream(), 3);
        const name = randomConsumer();
        const sub = await store.subscribe(name, { filter: { types: ['thing.happened'] } });
        await nextEvents(sub[Symbol.asyncIterator]());
        await sub.park(1, { reason: 'x' });
        await sub.ack(3);
        await sub.close();
        await store.consumers.delete(name);
        await rejectsWith(() => store.consumers.get(name), 'not_found');
        await rejectsWith(() => store.deadLetters.list(name), 'not_found');
        await rejectsWith(() => store.consumers.delete(name), 'not_found');
        const fresh = await store.subscribe(name, { filter: { types: ['other'] } });
        try {
          assert.equal(fresh.startPosition, 0);
          assert.deepEqual(await store.deadLetters.list(name), []);
        } finally {
          await fresh.close();
        }
      }));

    it('answers not_found and invalid_input for unknown or malformed names', () =>
      withStore(makeStore, async (store) => {
        await rejectsWith(() => store.consumers.get(randomConsumer()), 'not_found');
        await rejectsWith(() => store.consumers.reset(randomConsumer(), 0), 'not_found');
        await rejectsWith(() => store.consumers.get('no spaces'), 'invalid_input');
        await rejectsWith(() => store.deadLetters.retry('no spaces', { stream: 'x' }), 'invalid_input');
        assert.deepEqual(await store.consumers.list(), []);
      }));
  });
}
