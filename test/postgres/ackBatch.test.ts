// Acks of several consumers made at the same time are stored in one statement, each with its own
// outcome: the highest position per consumer, and a stale epoch fenced without failing the others.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import { quoteSchema } from '../../src/postgres/schemaName.js';
import { PostgresSubscriptionState } from '../../src/postgres/subscriptionState.js';
import { pgTestContext } from './pgFixtures.js';

const ctx = await pgTestContext();

describe('postgres acks made together', { skip: ctx.skip }, () => {
  it('go in one statement; each consumer gets its own position, a stale epoch is fenced', async () => {
    const store = await ctx.openStore();
    const pool = new pg.Pool({ connectionString: ctx.db.connectionString, max: 4 });
    const state = new PostgresSubscriptionState(pool, quoteSchema(store.schema));
    /** The client's `query`, spied on while the acks run. */
    const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
    const query = proto.query;
    try {
      const epochs = new Map<string, number>();
      for (const name of ['a', 'b', 'c']) {
        assert.equal((await state.register(name, {}, 0)).ok, true);
        const lease = await state.acquire(name, 'owner-1', name === 'c' ? 1 : 60_000);
        assert.ok(lease.ok);
        epochs.set(name, lease.epoch);
      }
      // Another owner takes `c` once the first one's lease ran out: the first one's epoch is stale.
      await new Promise((resolve) => setTimeout(resolve, 20));
      const taken = await state.acquire('c', 'owner-2', 60_000);
      assert.ok(taken.ok && taken.epoch > epochs.get('c')!);

      const statements: string[] = [];
      proto.query = function (this: pg.Client, ...args: unknown[]) {
        const q = args[0] as string | { text?: string };
        statements.push(typeof q === 'string' ? q : (q.text ?? ''));
        return query.apply(this, args);
      };
      const results = await Promise.all([
        state.ack('a', epochs.get('a')!, 10, []),
        state.ack('b', epochs.get('b')!, 20, []),
        state.ack('a', epochs.get('a')!, 7, []),
        state.ack('c', epochs.get('c')!, 30, []),
      ]);
      proto.query = query;

      const updates = statements.filter((s) => /UPDATE .*consumers/s.test(s));
      assert.equal(updates.length, 1, `one UPDATE for the four acks: ${updates.join(' | ')}`);
      assert.deepEqual(results[0], { ok: true, position: 10, resolved: 0 });
      assert.deepEqual(results[1], { ok: true, position: 20, resolved: 0 });
      // The lower ack of `a` in the same batch does not move its cursor back.
      assert.deepEqual(results[2], { ok: true, position: 10, resolved: 0 });
      assert.deepEqual(
        results[3],
        { ok: false, reason: 'fenced', currentEpoch: taken.ok ? taken.epoch : -1 },
        'the stale owner of c is fenced',
      );

      const stored = new Map((await store.consumers.list()).map((c) => [c.name, c.position]));
      assert.equal(stored.get('a'), 10);
      assert.equal(stored.get('b'), 20);
      assert.equal(stored.get('c'), 0, "the fenced ack did not move c's cursor");

      // An ack after the batch goes on its own, and a lower position keeps the stored one.
      assert.deepEqual(await state.ack('b', epochs.get('b')!, 15, []), {
        ok: true,
        position: 20,
        resolved: 0,
      });
    } finally {
      proto.query = query;
      await pool.end();
      await store.close();
    }
  });
});
