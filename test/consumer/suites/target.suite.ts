import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { randomStream } from '../../support/names.js';
import { until } from '../../support/until.js';
import { withHarness } from '../support/harness.js';
import type { MakeTargetFixture } from '../support/targetFixture.js';

/** The target port itself: migrations from several connections, fencing by epoch, sharing, addOnce. */
export function describeTarget<Tx>(label: string, make: MakeTargetFixture<Tx>): void {
  describe(`consumer target (${label})`, () => {
    it('migrates from several connections at once, and again as a no-op', () =>
      withHarness(make, async (h) => {
        const targets = await Promise.all([h.fx.another(), h.fx.another(), h.fx.another()]);
        await Promise.all([h.fx.target, ...targets].map((t) => t.migrate()));
        await Promise.all(targets.map((t) => t.migrate()));
        assert.deepEqual(await Promise.all(targets.map((t) => t.readCheckpoint('nobody'))), [
          { position: 0, epoch: 0 },
          { position: 0, epoch: 0 },
          { position: 0, epoch: 0 },
        ]);
      }));

    it("fences a batch whose epoch is older than the checkpoint's: nothing is written or acknowledged", () =>
      withHarness(make, async (h) => {
        const s = randomStream('invoice');
        await h.appendAmounts([s], 3);
        await h.fx.target.migrate();
        // A newer owner (epoch 99) already committed here.
        await h.fx.target.transaction(async (t) => {
          await t.checkpoint(h.name);
          await t.record(h.name, { entries: [], versions: new Map(), position: 0, epoch: 99 });
        });
        const c = h.consumer();
        await c.start();
        await until(() => c.status().state === 'stopped', { message: 'consumer stopped' });
        assert.equal(c.status().lastError?.code, 'fenced');
        assert.equal((await h.totals()).size, 0);
        assert.equal(await h.fx.target.ledgerSize(h.name), 0);
        assert.equal((await h.store.consumers.get(h.name)).position, 0);
      }));

    it('serves several consumers at once, each with its own ledger and checkpoint', () =>
      withHarness(make, async (h) => {
        const streams = [randomStream('invoice'), randomStream('invoice'), randomStream('invoice')];
        const expected = await h.appendAmounts(streams, 30);
        const consumers = [1, 2, 3].map((i) =>
          h.consumer({
            name: `${h.name}_${i}`,
            batch: { size: 7 },
            filter: { streamPrefixes: [streams[i - 1]!] },
          }),
        );
        await Promise.all(consumers.map((c) => c.start()));
        await Promise.all(consumers.map((c) => c.whenCaughtUp()));
        assert.deepEqual(await h.totals(), expected);
        for (const i of [1, 2, 3]) assert.equal(await h.fx.target.ledgerSize(`${h.name}_${i}`), 30);
      }));

    it('addOnce adds a member once, in the transaction', () =>
      withHarness(make, async (h) => {
        const counter = `c_${h.table}`;
        await h.fx.target.migrate();
        const first = await h.fx.target.transaction(async (t) => [await t.addOnce(counter, 'a', 5), await t.addOnce(counter, 'a', 5)]);
        assert.deepEqual(first, [true, false]);
        await assert.rejects(
          h.fx.target.transaction(async (t) => {
            await t.addOnce(counter, 'b', 7);
            throw new Error('rolled back');
          }),
          /rolled back/,
        );
        assert.equal(await h.fx.target.transaction((t) => t.addOnce(counter, 'b', 2)), true);
        assert.equal(await h.fx.target.counterValue(counter), 7);
        assert.equal(await h.fx.target.counterValue('unknown'), 0);
      }));
  });
}
