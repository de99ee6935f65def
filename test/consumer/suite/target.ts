import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { randomStream } from '../../support/names.js';
import { until } from '../../support/until.js';
import { withHarness } from '../support/harness.js';
import type { TargetTransaction } from '../../../src/core/consumerTarget.js';
import type { MakeTargetFixture } from '../support/targetFixture.js';

type BatchRecordArgs = Parameters<TargetTransaction<unknown>['record']>;

/** The target port itself: migrations from several connections, fencing by epoch, sharing, addOnce. */
export function describeTarget<Tx>(label: string, make: MakeTargetFixture<Tx>): void {
  describe(`consumer target (${label})`, () => {
    it('migrates from several connections at once, and again as a no-op', () =>
      withHarness(
        make,
        async (h) => {
          const targets = await Promise.all([h.fx.another(), h.fx.another(), h.fx.another()]);
          await Promise.all([h.fx.target, ...targets].map((t) => t.migrate()));
          await Promise.all(targets.map((t) => t.migrate()));
          assert.deepEqual(await Promise.all(targets.map((t) => t.readCheckpoint('nobody'))), [
            { position: 0, epoch: 0 },
            { position: 0, epoch: 0 },
            { position: 0, epoch: 0 },
          ]);
        },
        { fresh: true },
      ));

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

    it('processedKeys finds exactly the recorded keys: none, all, some, repeated keys, beyond one lookup chunk', () =>
      withHarness(make, async (h) => {
        await h.fx.target.migrate();
        const key = (i: number): string => `k-${i}`;
        // 1,500 recorded keys: more than one lookup chunk of 1,024.
        await h.fx.target.transaction(async (t) => {
          await t.checkpoint(h.name);
          const entries = Array.from({ length: 1500 }, (_, i) => ({ key: key(i), position: i + 1 }));
          await t.record(h.name, { entries, versions: new Map(), position: 1500, epoch: 0 });
        });
        const lookup = (keys: string[]): Promise<string[]> =>
          h.fx.target.transaction(async (t) => [...(await t.processedKeys(h.name, keys))].sort());
        const range = (from: number, to: number): string[] =>
          Array.from({ length: to - from }, (_, i) => key(from + i));
        assert.deepEqual(await lookup(range(2000, 2100)), [], 'none recorded');
        assert.deepEqual(await lookup(range(0, 1500)), range(0, 1500).sort(), 'all recorded, two chunks');
        const mixed = [...range(1400, 1600), key(5), key(5), 'other'];
        assert.deepEqual(
          await lookup(mixed),
          [...range(1400, 1500), key(5)].sort(),
          'some recorded, with a repeat',
        );
        // As many keys as hits, but one of them repeated: not every key is there.
        assert.deepEqual(await lookup([key(1), key(1), 'missing']), [key(1)]);
        assert.deepEqual(await lookup([key(7), key(7)]), [key(7)]);
        // Another consumer's ledger is not this one's.
        assert.deepEqual(
          await h.fx.target.transaction(async (t) => [
            ...(await t.processedKeys(`${h.name}_other`, range(0, 10))),
          ]),
          [],
        );
      }));

    it("a consumer's first ledger rows rolled back (whole transaction or savepoint) leave no trace in another consumer's ledger", () =>
      withHarness(make, async (h) => {
        await h.fx.target.migrate();
        const [a, b, c] = [`${h.name}_a`, `${h.name}_b`, `${h.name}_c`];
        const rec = (consumer: string, key: string): BatchRecordArgs => [
          consumer,
          { entries: [{ key, position: 1 }], versions: new Map(), position: 0, epoch: 0 },
        ];
        await assert.rejects(
          h.fx.target.transaction(async (t) => {
            await t.record(...rec(a, 'a-rolled-back'));
            throw new Error('rolled back');
          }),
          /rolled back/,
        );
        await h.fx.target.transaction(async (t) => {
          await t.savepoint();
          await t.record(...rec(c, 'c-rolled-back'));
          await t.rollbackToSavepoint();
          await t.record(...rec(b, 'b-1'));
        });
        await h.fx.target.transaction(async (t) => {
          await t.record(...rec(a, 'a-1'));
          await t.record(...rec(c, 'c-1'));
        });
        const all = ['a-rolled-back', 'a-1', 'b-1', 'c-rolled-back', 'c-1'];
        const seen = (consumer: string): Promise<string[]> =>
          h.fx.target.transaction(async (t) => [...(await t.processedKeys(consumer, all))].sort());
        assert.deepEqual(await seen(a), ['a-1']);
        assert.deepEqual(await seen(b), ['b-1']);
        assert.deepEqual(await seen(c), ['c-1']);
        for (const consumer of [a, b, c]) assert.equal(await h.fx.target.ledgerSize(consumer), 1, consumer);
        // A second connection (another process) sees the same ledgers.
        const other = await h.fx.another();
        assert.deepEqual(await other.transaction(async (t) => [...(await t.processedKeys(b, all))]), ['b-1']);
        assert.equal(await other.ledgerSize(c), 1);
      }));

    it("forgetEntity deletes one stream's entity version and ledger rows; the shred cursor never moves back", () =>
      withHarness(make, async (h) => {
        const t0 = h.fx.target;
        await t0.migrate();
        const [a, b] = [randomStream('invoice'), randomStream('invoice')];
        await t0.transaction(async (t) => {
          await t.checkpoint(h.name);
          await t.record(h.name, {
            entries: [
              { key: 'a1', position: 1 },
              { key: 'b2', position: 2 },
              { key: 'a3', position: 3 },
            ],
            versions: new Map([
              [a, 2],
              [b, 1],
            ]),
            position: 3,
            epoch: 1,
          });
        });
        assert.equal(await t0.shredCursor!(h.name), 0);
        await t0.transaction(async (t) => {
          await t.forgetEntity!(h.name, a, [1, 3]);
          await t.setShredCursor!(h.name, 7);
        });
        await t0.transaction(async (t) => {
          assert.deepEqual(await t.entityVersions(h.name, [a, b]), new Map([[b, 1]]));
          assert.deepEqual(await t.processedKeys(h.name, ['a1', 'b2', 'a3']), new Set(['b2']));
          await t.setShredCursor!(h.name, 5);
        });
        assert.equal(await t0.shredCursor!(h.name), 7);
        assert.equal(await t0.shredCursor!(`${h.name}_other`), 0);
      }));

    it('addOnce adds a member once, in the transaction', () =>
      withHarness(make, async (h) => {
        const counter = `c_${h.table}`;
        await h.fx.target.migrate();
        const first = await h.fx.target.transaction(async (t) => [
          await t.addOnce(counter, 'a', 5),
          await t.addOnce(counter, 'a', 5),
        ]);
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
