// Moving a consumer group to another partition count, as docs/consumer-groups.md says: a new versioned
// name with the new count replays the log into its own tables while the old version keeps serving,
// is promoted once caught up, and the old version is then stopped and deleted.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createConsumer, type Consumer } from '../../src/consumer/consumer.js';
import { activeVersion, promoteConsumer } from '../../src/effects/versions.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { randomCategory, randomSuffix } from '../support/names.js';
import { tempDir } from '../support/tempDir.js';
import { makeSqliteFixture } from './support/targetFixture.js';

describe('consumer group: another partition count under a new version (SQLite store and target)', () => {
  it('billing_v3 with 8 partitions replays into its own tables, is promoted, and billing_v2 (4) is deleted', async () => {
    const dir = tempDir();
    const store = await openSqliteStore({ path: dir.file('events.db') });
    const fx = await makeSqliteFixture();
    const table = `out_${randomSuffix()}`;
    const members: Consumer[] = [];
    const member = (name: string, partitions: number): Consumer => {
      const c = createConsumer({
        name,
        source: store,
        target: fx.target,
        partitions,
        leaseTtlMs: 1_000,
        handle: (e, ctx) =>
          fx.add(ctx.tx, `${table}${ctx.tableSuffix}`, e.stream, (e.data as { n: number }).n),
      });
      members.push(c);
      return c;
    };
    try {
      await fx.createTable(`${table}_v2`);
      await fx.createTable(`${table}_v3`);
      const c = randomCategory('invoice');
      const streams = Array.from({ length: 40 }, (_, i) => `${c}-${i}`);
      const expected = new Map<string, number>();
      const append = async (round: number): Promise<void> => {
        for (const s of streams) {
          await store.append(s, [{ type: 'invoice.line_added', data: { n: round } }]);
          expected.set(s, (expected.get(s) ?? 0) + round);
        }
      };
      await append(1);
      const v2 = [member('billing_v2', 4), member('billing_v2', 4)];
      for (const m of v2) await m.start();
      await v2[0]!.whenCaughtUp({ timeoutMs: 20_000 });
      await promoteConsumer({ source: store, target: fx.target, name: 'billing_v2' });
      await append(2);

      // The same count under the same name is refused: a new count is a new version.
      await assert.rejects(member('billing_v2', 8).start(), { code: 'consumer_identity_conflict' });
      const v3 = [member('billing_v3', 8), member('billing_v3', 8)];
      for (const m of v3) await m.start();
      await append(3);
      await v3[0]!.whenCaughtUp({ timeoutMs: 20_000 });
      await v2[0]!.whenCaughtUp({ timeoutMs: 20_000 });
      const totals = async (suffix: string): Promise<Map<string, number>> =>
        new Map([...(await fx.totals(`${table}${suffix}`))].map(([s, t]) => [s, t.total]));
      assert.deepEqual(await totals('_v3'), expected);
      assert.deepEqual(await totals('_v2'), expected);
      assert.equal((await store.consumers.get('billing_v3')).partitions?.length, 8);

      const promoted = await promoteConsumer({ source: store, target: fx.target, name: 'billing_v3' });
      assert.equal(promoted.consumer, 'billing_v3');
      assert.equal((await activeVersion(fx.target, 'billing'))?.consumer, 'billing_v3');

      for (const m of v2) await m.stop();
      await store.consumers.delete('billing_v2');
      await assert.rejects(store.consumers.get('billing_v2'), { code: 'not_found' });
      // The promoted version goes on alone.
      await append(4);
      await v3[1]!.whenCaughtUp({ timeoutMs: 20_000 });
      assert.deepEqual(await totals('_v3'), expected);
    } finally {
      for (const m of members) await m.stop().catch(() => undefined);
      await fx.cleanup();
      await store.close();
      await dir.cleanup();
    }
  });
});
