import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { randomStream } from '../../support/names.js';
import { until } from '../../support/until.js';
import { faultySource, type SourceFaults } from '../support/faults.js';
import { withHarness } from '../support/harness.js';
import type { MakeTargetFixture } from '../support/targetFixture.js';

/** Additive output, lifecycle, metrics. */
export function describeLifecycleAndMetrics<Tx>(label: string, make: MakeTargetFixture<Tx>): void {
  describe(`consumer lifecycle and metrics (${label})`, () => {
    it('addOnce counts each member once where a blind increment doubles (two consumer versions, one counter)', () =>
      withHarness(make, async (h) => {
        const s = randomStream('invoice');
        await h.appendAmounts([s], 6);
        const counter = `paid_${h.table}`;
        // Both versions also keep a blind total in the output table: each version's ledger is its own,
        // so the second version's replay adds everything again.
        for (const name of [`${h.name}_a`, `${h.name}_b`]) {
          const c = h.consumer({
            name,
            handle: async (e, ctx) => {
              await h.addAmount(e, ctx);
              await ctx.addOnce(counter, e.id, (e.data as { amount: number }).amount);
            },
          });
          await c.start();
          await c.whenCaughtUp();
          await c.stop();
        }
        let once = 0;
        for await (const e of h.store.readStream(s)) once += (e.data as { amount: number }).amount;
        assert.equal((await h.totals()).get(s), 2 * once, 'the blind total doubled');
        assert.equal(await h.fx.target.counterValue(counter), once, 'the set-membership counter did not');
      }));

    it('start() rejects with consumer_busy while another owns the name; a standby takes over when it stops', () =>
      withHarness(make, async (h) => {
        const s = randomStream('invoice');
        const expected = await h.appendAmounts([s], 3);
        const first = h.consumer({ leaseTtlMs: 60_000 });
        await first.start();
        await first.whenCaughtUp();
        const second = h.consumer();
        await assert.rejects(second.start(), { code: 'consumer_busy' });
        assert.equal(second.status().state, 'stopped');
        const standby = h.consumer({ standby: true });
        const started = standby.start();
        assert.equal(standby.status().state, 'idle');
        await first.stop();
        await started;
        assert.equal(standby.status().state, 'running');
        const more = await h.appendAmounts([s], 2);
        await standby.whenCaughtUp();
        assert.equal((await h.totals()).get(s), expected.get(s)! + more.get(s)!);
      }));

    it('start() rejects with consumer_identity_conflict for another filter under the same name', () =>
      withHarness(make, async (h) => {
        const first = h.consumer({ filter: { categories: ['invoice'] } });
        await first.start();
        await first.stop();
        const second = h.consumer({ filter: { categories: ['payment'] } });
        await assert.rejects(second.start(), { code: 'consumer_identity_conflict' });
      }));

    it('stop() finishes, releases the lease and is safe to call twice; start() again resumes', () =>
      withHarness(make, async (h) => {
        const s = randomStream('invoice');
        const c = h.consumer();
        await c.stop();
        assert.equal(c.status().state, 'idle', 'stopping a consumer that never started changes nothing');
        await h.appendAmounts([s], 3);
        await c.start();
        await c.whenCaughtUp();
        await Promise.all([c.stop(), c.stop()]);
        await c.stop();
        assert.equal(c.status().state, 'stopped');
        const info = await h.store.consumers.get(h.name);
        assert.equal(info.owner, null);
        assert.equal(info.position, 3);
        const more = await h.appendAmounts([s], 1);
        await c.start();
        await c.whenCaughtUp();
        assert.equal(c.status().position, 4);
        assert.ok((await h.totals()).get(s)! > more.get(s)!);
      }));

    it('start() during a stop starts again once the stop is done', () =>
      withHarness(make, async (h) => {
        const s = randomStream('invoice');
        await h.appendAmounts([s], 2);
        const c = h.consumer();
        await c.start();
        await c.whenCaughtUp();
        const stopped = c.stop();
        const started = c.start();
        assert.equal(c.status().phase, 'stopping');
        await stopped;
        await started;
        assert.equal(c.status().state, 'running');
        await h.appendAmounts([s], 1);
        await c.whenCaughtUp();
        assert.equal(c.status().position, 3);
      }));

    it('reconnects with backoff when the source fails, and loses or doubles nothing', () =>
      withHarness(make, async (h) => {
        const streams = [randomStream('invoice'), randomStream('invoice')];
        const expected = await h.appendAmounts(streams, 10);
        const faults: SourceFaults = { breakAt: 2, seen: { subscribes: 0, acks: 0, messages: 0 } };
        const c = h.consumer({ source: faultySource(h.store, faults), batch: { size: 4 } });
        await c.start();
        await c.whenCaughtUp();
        assert.deepEqual(await h.totals(), expected);
        assert.equal(c.metrics().reconnects, 1);
        assert.equal(faults.seen?.subscribes, 2);
        assert.equal(await h.fx.target.ledgerSize(h.name), 20);
      }));

    it('whenCaughtUp() resolves when the last events at call time do not match the filter', () =>
      withHarness(make, async (h) => {
        const s = randomStream('invoice');
        const c = h.consumer({ filter: { types: ['amount.added'] } });
        await c.start();
        await h.appendAmounts([s], 2);
        await h.store.append(s, [{ type: 'invoice.noted', data: { amount: 1 } }]);
        await c.whenCaughtUp({ timeoutMs: 10_000 });
        assert.equal(c.status().position, 2);
        assert.equal((await h.totals()).get(s) !== undefined, true);
      }));

    it('reports delivered, processed, duplicates and latencies in metrics() and a prom-client registry', () =>
      withHarness(make, async (h) => {
        const registry = new Registry();
        const s = randomStream('invoice');
        await h.appendAmounts([s], 5);
        const c = h.consumer({ metrics: { registry }, source: faultySource(h.store, { failAcks: 1 }) });
        await c.start();
        await c.whenCaughtUp();
        const m = c.metrics();
        assert.equal(m.delivered, 10);
        assert.equal(m.processed, 5);
        assert.equal(m.duplicates, 5);
        assert.equal(m.repeatRate, 0.5);
        assert.equal(m.reconnects, 1);
        assert.equal(m.handlerLatency.count, 5);
        assert.equal(m.endToEndLatency.count, 5);
        assert.equal(m.position, 5);
        await until(() => c.metrics().checkpointLag.events === 0, { message: 'no checkpoint lag' });
        const text = await registry.metrics();
        assert.match(text, new RegExp(`idem_consumer_processed_total\\{consumer="${h.name}"\\} 5`));
        assert.match(text, new RegExp(`idem_consumer_duplicates_total\\{consumer="${h.name}"\\} 5`));
        assert.match(text, new RegExp(`idem_consumer_reconnects_total\\{consumer="${h.name}"\\} 1`));
        assert.match(text, new RegExp(`idem_consumer_handler_seconds_count\\{consumer="${h.name}"\\} 5`));
        assert.match(text, /idem_consumer_checkpoint_lag_events/);
      }));
  });
}
