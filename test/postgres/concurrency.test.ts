import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isIdemError, WrongExpectedVersionError } from '../../src/core/errors.js';
import type { PostgresEventStore } from '../../src/postgres/index.js';
import { randomStream } from '../support/names.js';
import { pgTestContext } from './pgFixtures.js';

const pg = await pgTestContext();

/** Opens `n` stores on one schema: separate pools, so appends race across connections too. */
async function openStores(n: number): Promise<PostgresEventStore[]> {
  const first = await pg.openStore({ poolSize: 4 });
  const rest = await Promise.all(
    Array.from({ length: n - 1 }, () => pg.openStore({ schema: first.schema, poolSize: 4 })),
  );
  return [first, ...rest];
}

describe('postgres store under concurrent writers', { skip: pg.skip }, () => {
  it('16 writers on one stream with expected versions: one winner per version, clean conflicts, no holes', async () => {
    const stores = await openStores(4);
    try {
      const stream = randomStream('race');
      const target = 160;
      const winners = new Map<number, number>();
      let conflicts = 0;
      await Promise.all(
        Array.from({ length: 16 }, async (_, w) => {
          const store = stores[w % stores.length]!;
          let known = 0;
          for (;;) {
            if (known >= target) return;
            try {
              const r = await store.append(stream, [{ type: 'bid', data: { writer: w, at: known } }], {
                expectedVersion: known,
              });
              assert.equal(r.version, known + 1);
              assert.equal(winners.has(r.version), false, `version ${r.version} won twice`);
              winners.set(r.version, w);
              known = r.version;
            } catch (err) {
              assert.ok(err instanceof WrongExpectedVersionError, `unexpected ${String(err)}`);
              assert.equal(err.code, 'wrong_expected_version');
              assert.ok(err.actual > known, 'the conflict names a newer actual version');
              conflicts++;
              known = err.actual;
            }
          }
        }),
      );
      const events = [];
      for await (const e of stores[0]!.readStream(stream)) events.push(e);
      const versions = events.map((e) => e.version);
      const positions = events.map((e) => e.position);
      const lost = [...winners.keys()].filter((v) => !versions.includes(v)).length;
      const doubled = versions.length - new Set(versions).size;
      const holes = versions.filter((v, i) => v !== i + 1).length;
      console.log(
        `# 16 writers: ${winners.size} wins, ${conflicts} conflicts, lost ${lost}, doubled ${doubled}, holes ${holes}`,
      );
      assert.equal(events.length, winners.size);
      assert.ok(events.length >= target);
      assert.deepEqual(
        versions,
        Array.from({ length: events.length }, (_, i) => i + 1),
      );
      assert.deepEqual(
        positions,
        [...positions].sort((a, b) => a - b),
      );
      for (const e of events) assert.equal(winners.get(e.version), (e.data as { writer: number }).writer);
      assert.ok(conflicts > 0, 'the writers really raced');
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  it('16 appends expecting the same version: exactly one wins, 15 get the actual version', async () => {
    const stores = await openStores(4);
    try {
      const stream = randomStream('same');
      await stores[0]!.append(stream, [{ type: 'opened', data: null }]);
      const results = await Promise.allSettled(
        Array.from({ length: 16 }, (_, w) =>
          stores[w % stores.length]!.append(stream, [{ type: 'claim', data: { w } }], { expectedVersion: 1 }),
        ),
      );
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      assert.equal(won.length, 1);
      assert.equal(lost.length, 15);
      for (const l of lost) {
        assert.ok(isIdemError(l.reason, 'wrong_expected_version'));
        assert.equal((l.reason as WrongExpectedVersionError).actual, 2);
      }
      assert.equal(await stores[1]!.streamVersion(stream), 2);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  it('concurrent appends to many streams get gap-free positions in commit order', async () => {
    const stores = await openStores(3);
    try {
      const results = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          stores[i % stores.length]!.append(
            `multi-${i % 7}`,
            Array.from({ length: 1 + (i % 5) }, (_, k) => ({ type: 't', data: { i, k } })),
          ),
        ),
      );
      const total = results.reduce((n, r) => n + r.ids.length, 0);
      assert.equal(await stores[2]!.headPosition(), total);
      const positions: number[] = [];
      const versions = new Map<string, number>();
      for await (const e of stores[1]!.readAll()) {
        positions.push(e.position);
        assert.equal(e.version, (versions.get(e.stream) ?? 0) + 1, `${e.stream} versions are contiguous`);
        versions.set(e.stream, e.version);
      }
      assert.deepEqual(
        positions,
        Array.from({ length: total }, (_, i) => i + 1),
      );
      for (const r of results)
        assert.equal(r.lastPosition - r.firstPosition + 1, r.ids.length, 'one append, one position block');
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });
});
