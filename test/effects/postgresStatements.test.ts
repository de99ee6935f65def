// The effect outbox's per-effect statements are named: prepared once per connection, not parsed and
// planned for every effect.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import { postgresTarget } from '../../src/postgres/target.js';
import { requireOrSkip } from '../support/services.js';
import { createTempDatabase } from '../support/postgres.js';

const skip = await requireOrSkip('postgres');

describe('the PostgreSQL outbox statements', { skip }, () => {
  it('are prepared once per connection: insert, claim, extend, complete and release', async () => {
    const db = await createTempDatabase();
    // One connection: every statement below runs on it, and pg_prepared_statements is per session.
    const pool = new pg.Pool({ connectionString: db.connectionString, max: 1 });
    const target = postgresTarget(pool);
    try {
      await target.migrate();
      const effect = (key: string) => ({
        scope: 'billing',
        key,
        kind: 'email',
        payload: JSON.stringify({ to: key }),
        consumer: 'billing_v1',
        eventId: `event-${key}`,
        position: 1,
        status: 'pending' as const,
        traceparent: null,
      });
      const { outbox } = target;
      const inserted = await target.transaction((t) =>
        Promise.all([outbox.insert(t.tx, effect('a')), outbox.insert(t.tx, effect('b'))]),
      );
      assert.deepEqual(inserted, [true, true]);
      const claimed = await target.transaction((t) =>
        outbox.claim(t.tx, { owner: 'd1', kinds: ['email'], leaseMs: 60_000, limit: 10 }),
      );
      assert.deepEqual(
        claimed.map((c) => c.key),
        ['a', 'b'],
      );
      const [a, b] = claimed;
      const outcomes = await target.transaction(async (t) => [
        await outbox.extendLease(t.tx, a!.id, 'd1', 60_000),
        await outbox.complete(t.tx, a!.id, 'd1', JSON.stringify({ sent: true })),
        await outbox.release(t.tx, b!.id, 'd1', 'Error: mailbox full', 1_000),
      ]);
      assert.deepEqual(outcomes, [true, true, true]);
      const names = (await pool.query<{ name: string }>('SELECT name FROM pg_prepared_statements')).rows.map(
        (r) => r.name,
      );
      for (const what of ['insert', 'claim', 'extend_lease', 'complete', 'release'])
        assert.ok(
          names.some((n) => n.startsWith(`idem_effects_${what}_`)),
          `${what} is not among the prepared statements: ${names.join(', ')}`,
        );
    } finally {
      await target.close();
      await pool.end();
      await db.drop();
    }
  });
});
