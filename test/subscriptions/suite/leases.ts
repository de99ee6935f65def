import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { suspendLeaseRenewal } from '../../../src/subscriptions/faults.js';
import { randomConsumer, randomStream } from '../../support/names.js';
import { until } from '../../support/until.js';
import { appendN, nextEvents, Reader, rejectsWith, withStore, type MakeStore } from './context.js';

/** One owner per identity, standby, takeover, fencing, identity check. */
export function leaseTests(makeStore: MakeStore): void {
  describe('ownership, leases and fencing', () => {
    it('refuses a second subscriber with consumer_busy naming the owner', () =>
      withStore(makeStore, async (store, reopen) => {
        const other = await reopen();
        const name = randomConsumer();
        const sub = await store.subscribe(name, { owner: 'worker-a' });
        try {
          const err = await rejectsWith(
            () => other.store.subscribe(name, { owner: 'worker-b' }),
            'consumer_busy',
          );
          assert.match(err.message, /worker-a/);
          assert.equal(err.details.owner, 'worker-a');
          const info = await store.consumers.get(name);
          assert.equal(info.owner, 'worker-a');
          assert.equal(info.epoch, sub.epoch);
        } finally {
          await sub.close();
          await other.cleanup();
        }
      }));

    it('lets a standby take over at once when the owner closes, with a higher epoch and the cursor', () =>
      withStore(makeStore, async (store, reopen) => {
        const other = await reopen();
        await appendN(store, randomStream(), 3);
        const name = randomConsumer();
        const first = await store.subscribe(name, { owner: 'a' });
        await nextEvents(first[Symbol.asyncIterator]());
        await first.ack(2);
        let tookOver = false;
        const standby = other.store.subscribe(name, { owner: 'b', standby: true }).then((s) => {
          tookOver = true;
          return s;
        });
        try {
          await store.consumers.get(name);
          assert.equal(tookOver, false, 'the standby waits while the owner holds the lease');
          await first.close();
          const second = await standby;
          assert.ok(second.epoch > first.epoch);
          assert.equal(second.startPosition, 2);
          assert.deepEqual(
            (await nextEvents(second[Symbol.asyncIterator]())).events.map((e) => e.position),
            [3],
          );
          await second.close();
        } finally {
          await first.close();
          await (await standby.catch(() => null))?.close();
          await other.cleanup();
        }
      }));

    it('fences a stale owner: after its lease expired and a standby took over, its acks and parks fail', async (t) =>
      withStore(makeStore, async (store, reopen) => {
        const other = await reopen();
        await appendN(store, randomStream(), 4);
        const name = randomConsumer();
        const stale = await store.subscribe(name, { leaseTtlMs: 1000, owner: 'stale' });
        try {
          if (!suspendLeaseRenewal(stale)) {
            t.skip('this store runs subscriptions elsewhere; fencing is covered by its own fault tests');
            return;
          }
          const it = stale[Symbol.asyncIterator]();
          await nextEvents(it);
          const fresh = await other.store.subscribe(name, {
            standby: true,
            owner: 'fresh',
            leaseTtlMs: 2000,
          });
          try {
            assert.equal(fresh.epoch, stale.epoch + 1);
            const fenced = await rejectsWith(() => stale.ack(4), 'fenced');
            assert.equal(fenced.details.currentEpoch, fresh.epoch);
            await rejectsWith(() => stale.park(1, { reason: 'late' }), 'fenced');
            await assert.rejects(it.next(), (e: Error & { code?: string }) => e.code === 'fenced');
            assert.equal((await other.store.consumers.get(name)).position, 0);
            assert.deepEqual(await other.store.deadLetters.list(name), []);
            assert.equal((await nextEvents(fresh[Symbol.asyncIterator]())).events.length, 4);
          } finally {
            await fresh.close();
          }
        } finally {
          await stale.close();
          await other.cleanup();
        }
      }));

    it('stops a stale owner with fenced at its next ack once another owner took over', async (t) =>
      withStore(makeStore, async (store, reopen) => {
        const other = await reopen();
        const name = randomConsumer();
        const stale = await store.subscribe(name, { leaseTtlMs: 1000 });
        const reader = new Reader(stale);
        try {
          if (!suspendLeaseRenewal(stale)) {
            t.skip('this store runs subscriptions elsewhere; fencing is covered by its own fault tests');
            return;
          }
          const fresh = await other.store.subscribe(name, { standby: true });
          try {
            // The stale owner (no heartbeat) may still see the next event; its ack is fenced.
            await appendN(other.store, randomStream(), 1);
            await until(() => reader.error !== null || reader.events.length > 0, {
              message: 'stale owner stopped',
            });
            await reader.done;
            assert.equal((reader.error as { code?: string } | null)?.code, 'fenced');
          } finally {
            await fresh.close();
          }
        } finally {
          await reader.stop();
          await other.cleanup();
        }
      }));

    it('refuses a different filter under an existing name, suggesting a versioned name', () =>
      withStore(makeStore, async (store) => {
        const name = `billing_${randomStream('x').slice(2)}_v2`;
        const sub = await store.subscribe(name, { filter: { types: ['invoice.issued'] } });
        await sub.close();
        const err = await rejectsWith(
          () => store.subscribe(name, { filter: { types: ['invoice.paid'] } }),
          'consumer_identity_conflict',
        );
        assert.match(err.message, /_v3"/);
        assert.deepEqual(err.details.existingFilter, { types: ['invoice.issued'] });
        // The same filter in another order is the same identity.
        const again = await store.subscribe(name, {
          filter: { types: ['invoice.issued', 'invoice.issued'] },
        });
        await again.close();
      }));

    it('records a failure: status failed with the error and event, lease released, cursor kept', () =>
      withStore(makeStore, async (store) => {
        const s = randomStream();
        await appendN(store, s, 3);
        const name = randomConsumer();
        const sub = await store.subscribe(name);
        const m = await nextEvents(sub[Symbol.asyncIterator]());
        await sub.ack(1);
        const bad = m.events[1]!;
        const error = new Error('boom');
        await sub.fail({ error, event: bad });
        const info = await store.consumers.get(name);
        assert.equal(info.status, 'failed');
        assert.equal(info.position, 1);
        assert.equal(info.owner, null);
        assert.equal(info.lastError?.message, 'boom');
        assert.match(info.lastError?.stack ?? '', /boom/);
        assert.deepEqual(info.failedEvent, {
          id: bad.id,
          stream: s,
          version: 2,
          position: 2,
          type: bad.type,
        });
        const next = await store.subscribe(name);
        try {
          assert.equal(next.startPosition, 1);
          assert.equal((await store.consumers.get(name)).status, 'running');
        } finally {
          await next.close();
        }
      }));

    it('stops a standby wait when its signal aborts', () =>
      withStore(makeStore, async (store) => {
        const name = randomConsumer();
        const owner = await store.subscribe(name);
        try {
          const ac = new AbortController();
          const waiting = store.subscribe(name, { standby: true, signal: ac.signal });
          ac.abort();
          await rejectsWith(() => waiting, 'closed');
        } finally {
          await owner.close();
        }
      }));
  });
}
