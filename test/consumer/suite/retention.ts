import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { isIdemError } from '../../../src/core/errors.js';
import { pruneEveryEventsForTests } from '../../../src/consumer/ledgerPruner.js';
import { randomStream } from '../../support/names.js';
import { faultySource, type SourceFaults } from '../support/faults.js';
import { withHarness, type Harness } from '../support/harness.js';
import type { MakeTargetFixture } from '../support/targetFixture.js';

/**
 * The consumers of this suite prune every `EVERY` handled events (`PRUNE_EVERY_EVENTS` is 5,000): the
 * batch sizes and event counts below are that cadence's, scaled down with it, so that each test runs
 * the same batches and prunes in a tenth of the events.
 */
const EVERY = 500;

/** Appends `count` events `{ amount: 1 }` over `streams`, in appends of up to 100; returns the totals. */
async function appendOnes<Tx>(
  h: Harness<Tx>,
  streams: string[],
  count: number,
): Promise<Map<string, number>> {
  const expected = new Map<string, number>();
  let left = count;
  let i = 0;
  while (left > 0) {
    const n = Math.min(100, left);
    const s = streams[i++ % streams.length]!;
    await h.store.append(
      s,
      Array.from({ length: n }, () => ({ type: 'amount.added', data: { amount: 1 } })),
    );
    expected.set(s, (expected.get(s) ?? 0) + n);
    left -= n;
  }
  return expected;
}

function refusedBelow(horizon: number): (err: unknown) => boolean {
  return (err) =>
    isIdemError(err, 'invalid_input') &&
    err.message.includes(`through position ${horizon}`) &&
    err.message.includes('new consumer version');
}

/** Ledger retention: `target.pruneLedger`, the `ledger: { retain }` policy and the pruned horizon. */
export function describeLedgerRetention<Tx>(label: string, make: MakeTargetFixture<Tx>): void {
  describe(`consumer ledger retention (${label})`, () => {
    let restore: () => void = () => undefined;
    before(() => {
      restore = pruneEveryEventsForTests(EVERY);
    });
    after(() => restore());

    it('pruneLedger deletes the rows the checkpoint covers, keeps the newest `keep` events and records the horizon', () =>
      withHarness(make, async (h) => {
        const target = h.fx.target;
        const streams = [randomStream('invoice'), randomStream('invoice')];
        const expected = await h.appendAmounts(streams, 15);
        const c = h.consumer({ batch: { size: 10, catchUpSize: 10 } });
        await c.start();
        await c.whenCaughtUp();
        await c.stop();
        assert.equal(await target.ledgerSize(h.name), 30);
        assert.equal(await target.ledgerHorizon!(h.name), 0);
        assert.deepEqual(await target.pruneLedger!(h.name, { keep: 10 }), { deleted: 20, horizon: 20 });
        assert.equal(await target.ledgerSize(h.name), 10);
        // Keeping more later never brings rows back or moves the horizon down.
        assert.deepEqual(await target.pruneLedger!(h.name, { keep: 25 }), { deleted: 0, horizon: 20 });
        assert.deepEqual(await target.pruneLedger!(h.name, { through: 25 }), { deleted: 5, horizon: 25 });
        assert.deepEqual(await target.pruneLedger!(h.name), { deleted: 5, horizon: 30 });
        assert.equal(await target.ledgerSize(h.name), 0);
        assert.deepEqual(await target.pruneLedger!('nobody_v1'), { deleted: 0, horizon: 0 });
        assert.deepEqual(await h.totals(), expected);
        await assert.rejects(
          target.pruneLedger!(h.name, { keep: -1 }),
          (err: unknown) => isIdemError(err, 'invalid_input') && err.message.includes('options.keep'),
        );
      }));

    it("retain: 'checkpoint' keeps the ledger small; a reset below the horizon is refused, at or above it is not; a crash between commit and ack after a prune doubles nothing", () =>
      withHarness(make, async (h) => {
        const streams = [randomStream('invoice'), randomStream('invoice'), randomStream('invoice')];
        // Exactly one prune's worth: the runtime prunes right after the ack of the last event.
        const expected = await appendOnes(h, streams, EVERY);
        const faults: SourceFaults = { seen: { subscribes: 0, acks: 0, messages: 0 } };
        const c = h.consumer({
          source: faultySource(h.store, faults),
          ledger: { retain: 'checkpoint' },
          batch: { size: 50, catchUpSize: 100 },
        });
        await c.start();
        await c.whenCaughtUp();
        const horizon = await h.fx.target.ledgerHorizon!(h.name);
        assert.equal(horizon, EVERY, 'pruned through the last acknowledged position');
        assert.equal(await h.fx.target.ledgerSize(h.name), 0);
        const acksBefore = faults.seen!.acks;

        // The very next ack after that prune is lost (a crash after the commit, before the ack):
        // the batch comes again, above the horizon, and the committed checkpoint skips it.
        faults.failAcks = 1;
        const more = await appendOnes(h, streams, 150);
        for (const [s, n] of more) expected.set(s, (expected.get(s) ?? 0) + n);
        await c.whenCaughtUp();
        assert.equal(faults.failAcks, 0);
        assert.ok(faults.seen!.acks > acksBefore + 1, 'the lost ack was followed by others');
        assert.ok(c.metrics().duplicates > 0, 'the unacknowledged batch was delivered again');
        assert.deepEqual(await h.totals(), expected);
        await c.stop();

        await assert.rejects(h.store.consumers.reset(h.name, horizon - 1), refusedBelow(horizon));
        await assert.rejects(h.store.consumers.reset(h.name, 0), refusedBelow(horizon));
        await h.store.consumers.reset(h.name, horizon);
        const again = h.consumer({ ledger: { retain: 'checkpoint' } });
        await again.start();
        await again.whenCaughtUp();
        assert.equal(again.status().state === 'failed', false);
        assert.deepEqual(await h.totals(), expected);
      }));

    it("a prune due while events wait runs in the next batch's transaction; that batch's ack lost, nothing doubles and the store learns the horizon", () =>
      withHarness(make, async (h) => {
        const streams = [randomStream('invoice'), randomStream('invoice'), randomStream('invoice')];
        // Two prunes come due before the last batch: each runs in the batch after it.
        const total = 2 * EVERY + 200;
        const expected = await appendOnes(h, streams, total);
        const faults: SourceFaults = { seen: { subscribes: 0, acks: 0, messages: 0 } };
        // Prunes in transactions of their own; those inside a batch's go through its transaction.
        let ownPrunes = 0;
        const real = h.fx.target;
        const target = new Proxy(real, {
          get(t, prop) {
            if (prop === 'pruneLedger')
              return (...args: Parameters<NonNullable<typeof real.pruneLedger>>) => {
                ownPrunes++;
                return t.pruneLedger!(...args);
              };
            const v: unknown = Reflect.get(t, prop, t);
            return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
          },
        });
        let lost = false;
        const c = h.consumer({
          source: faultySource(h.store, faults),
          target,
          ledger: { retain: 'checkpoint' },
          batch: { size: 50, catchUpSize: 100 },
          handle: async (e, ctx) => {
            // The batch after the first due prune carries it: its ack is lost (a crash after its commit).
            if (e.position === EVERY + 1 && !lost) {
              lost = true;
              faults.failAcks = 1;
            }
            await h.addAmount(e, ctx);
          },
        });
        await c.start();
        await c.whenCaughtUp();
        await c.stop();
        assert.equal(faults.failAcks, 0);
        assert.ok(c.metrics().duplicates > 0, 'the unacknowledged batch was delivered again');
        assert.equal(ownPrunes, 0, "every prune ran inside a batch's transaction");
        const horizon = await real.ledgerHorizon!(h.name);
        assert.ok(horizon > EVERY && horizon < total, `pruned through ${horizon}`);
        assert.equal(await real.ledgerSize(h.name), total - horizon);
        assert.deepEqual(await h.totals(), expected);
        await assert.rejects(h.store.consumers.reset(h.name, horizon - 1), refusedBelow(horizon));
        await h.store.consumers.reset(h.name, horizon);
      }));

    it('refuses to start when the source cursor is below the target horizon (a consumer deleted and made again)', () =>
      withHarness(make, async (h) => {
        await h.appendAmounts([randomStream('invoice')], 20);
        const c = h.consumer();
        await c.start();
        await c.whenCaughtUp();
        await c.stop();
        await h.fx.target.pruneLedger!(h.name);
        await h.store.consumers.delete(h.name);
        const again = h.consumer();
        await assert.rejects(
          again.start(),
          (err: unknown) => refusedBelow(20)(err) && (err as Error).message.startsWith('cursor'),
        );
        assert.equal(again.status().state, 'stopped');
      }));

    it('with the entity-version guard, a reset below the horizon stays allowed and nothing doubles', () =>
      withHarness(make, async (h) => {
        const expected = await appendOnes(h, [randomStream('invoice')], EVERY + 10);
        const c = h.consumer({ guard: ['event-id', 'entity-version'], ledger: { retain: { events: 10 } } });
        await c.start();
        await c.whenCaughtUp();
        await c.stop();
        assert.ok((await h.fx.target.ledgerHorizon!(h.name)) > 0);
        assert.ok((await h.fx.target.ledgerSize(h.name)) <= EVERY / 5);
        await h.store.consumers.reset(h.name, 0);
        await h.fx.target.transaction(async () => undefined);
        const again = h.consumer({ guard: ['event-id', 'entity-version'] });
        await again.start();
        await again.whenCaughtUp();
        assert.deepEqual(await h.totals(), expected);
      }));

    it('retain: { age } prunes only the rows of events recorded longer ago than the age', () =>
      withHarness(make, async (h) => {
        const streams = [randomStream('invoice'), randomStream('invoice')];
        const expected = await appendOnes(h, streams, EVERY);
        // The first 60% of the events look recorded 40 days ago, the others now.
        const old = 0.6 * EVERY;
        const longAgo = new Date(Date.now() - 40 * 86_400_000).toISOString();
        const c = h.consumer({
          source: faultySource(h.store, { recordedAt: (e) => (e.position <= old ? longAgo : e.recordedAt) }),
          ledger: { retain: { age: '30d' } },
          batch: { size: 50, catchUpSize: 100 },
        });
        await c.start();
        await c.whenCaughtUp();
        await c.stop();
        const horizon = await h.fx.target.ledgerHorizon!(h.name);
        assert.ok(horizon > 0 && horizon <= old, `pruned through ${horizon}, within the aged events`);
        assert.equal(await h.fx.target.ledgerSize(h.name), EVERY - horizon);
        assert.deepEqual(await h.totals(), expected);
        await assert.rejects(h.store.consumers.reset(h.name, horizon - 1), refusedBelow(horizon));
      }));

    it('keeps the rows at and after the first parked event while it is parked', () =>
      withHarness(make, async (h) => {
        const bad = randomStream('invoice');
        const good = randomStream('invoice');
        await h.store.append(bad, [{ type: 'amount.added', data: { amount: -1 } }]);
        await appendOnes(h, [good], EVERY);
        const c = h.consumer({
          ledger: { retain: 'checkpoint' },
          onError: { attempts: 1, then: 'dead-letter' },
          handle: async (e, ctx) => {
            if ((e.data as { amount: number }).amount < 0) throw new Error('negative amount');
            await h.addAmount(e, ctx);
          },
        });
        await c.start();
        await c.whenCaughtUp();
        await c.stop();
        assert.equal((await h.store.deadLetters.list(h.name)).length, 1);
        // The parked event is position 1: nothing before it to prune, everything after it kept.
        assert.equal(await h.fx.target.ledgerHorizon!(h.name), 0);
        assert.equal(await h.fx.target.ledgerSize(h.name), EVERY);
      }));

    it('refuses a bad retention policy, naming the field', () =>
      withHarness(make, async (h) => {
        const bad = [
          [{ retain: 'forever' }, 'ledger.retain'],
          [{ retain: { events: 0 } }, 'ledger.retain.events'],
          [{ retain: { events: 20_000_000 } }, 'ledger.retain.events'],
          [{ retain: { age: '30 days' } }, 'ledger.retain.age'],
          [{ retain: { age: '4000d' } }, 'ledger.retain.age'],
          [{ retain: 'checkpoint', keep: 3 }, 'ledger.keep'],
        ] as const;
        for (const [ledger, field] of bad) {
          assert.throws(
            () => h.consumer({ ledger: ledger as never }),
            (err: unknown) => isIdemError(err, 'invalid_input') && err.message.startsWith(`${field}:`),
            JSON.stringify(ledger),
          );
        }
        h.consumer({ ledger: { retain: { age: '30d' } } });
      }));
  });
}
