import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import pg from 'pg';
import type { NewEvent } from '../../src/core/event.js';
import { until } from '../support/until.js';
import { pgTestContext } from './pgFixtures.js';

const ctx = await pgTestContext();

/**
 * Terminates every other client backend of the test database, in `rounds` rounds about 150 ms apart
 * (bounded, so that a slow machine still gets its appends through between rounds), or until stopped.
 * Counts the backends it terminated.
 */
function startKiller(rounds = 15): { stop: () => Promise<number> } {
  let running = true;
  let kills = 0;
  const done = (async () => {
    const client = new pg.Client({ connectionString: ctx.db.connectionString });
    await client.connect();
    try {
      for (let round = 0; running && round < rounds; round++) {
        // Wait (briefly) for a statement in flight, so that the round cuts one and not only idle
        // connections, which the pool drops without any statement to retry.
        const deadline = Date.now() + 100;
        while (running && Date.now() < deadline) {
          const a = await client.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database()
              AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND state = 'active'`,
          );
          if (a.rows[0]!.n > 0) break;
        }
        const r = await client.query<{ killed: boolean }>(
          `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
        );
        kills += r.rows.filter((row) => row.killed).length;
        // Let the victims reconnect and get some work in flight before the next round.
        await client.query('SELECT pg_sleep(0.15)');
      }
    } finally {
      await client.end();
    }
  })();
  return {
    stop: async () => {
      running = false;
      await done;
      return kills;
    },
  };
}

describe('postgres store: connection faults', { skip: ctx.skip }, () => {
  it('appends survive pg_terminate_backend: nothing acknowledged is lost or doubled, versions stay contiguous', async () => {
    const store = await ctx.openStore({ poolSize: 4, retry: { attempts: 20, initialDelayMs: 5 } });
    const heads: number[] = [];
    store.onAppend((h) => heads.push(h));
    await until(() => store.listening, { message: 'the LISTEN connection' });
    const acknowledged = new Map<string, { stream: string; version: number }>();
    let failures = 0;
    const killer = startKiller();
    try {
      await Promise.all(
        Array.from({ length: 4 }, async (_, w) => {
          const stream = `fault-${w}`;
          // 40 appends each, and more while no statement has been cut yet (a fast machine can
          // finish 40 between two rounds of the killer, cutting only idle connections).
          for (let i = 0; i < 40 || (store.connectionFaults === 0 && i < 400); i++) {
            const batch: NewEvent[] = Array.from({ length: 5 }, (_, k) => ({
              id: randomUUID(),
              type: 'tick',
              data: { w, i, k },
            }));
            try {
              const r = await store.append(stream, batch, { expectedVersion: i * 5 });
              assert.equal(r.version, (i + 1) * 5);
              batch.forEach((e, k) => acknowledged.set(e.id!, { stream, version: r.version - 4 + k }));
            } catch (err) {
              failures++;
              throw err;
            }
          }
        }),
      );
    } finally {
      const kills = await killer.stop();
      console.log(`# backends terminated during the appends: ${kills}`);
      assert.ok(kills > 0, 'the killer terminated backends');
    }
    try {
      const seen = new Map<string, number>();
      let last = 0;
      let outOfOrder = 0;
      for await (const e of store.readAll()) {
        seen.set(e.id, (seen.get(e.id) ?? 0) + 1);
        if (e.position !== last + 1) outOfOrder++;
        last = e.position;
        const ack = acknowledged.get(e.id);
        if (ack) assert.deepEqual({ stream: e.stream, version: e.version }, ack);
      }
      const lost = [...acknowledged.keys()].filter((id) => !seen.has(id)).length;
      const doubled = [...seen.values()].filter((n) => n > 1).length;
      console.log(
        `# acknowledged ${acknowledged.size}, stored ${seen.size}, lost ${lost}, doubled ${doubled}, out of order ${outOfOrder}, ` +
          `failed appends ${failures}, faults recovered ${store.connectionFaults}`,
      );
      assert.ok(store.connectionFaults > 0, 'some statements were cut by the killer and retried');
      assert.equal(failures, 0);
      assert.equal(lost, 0);
      assert.equal(doubled, 0);
      assert.equal(outOfOrder, 0);
      assert.equal(seen.size, acknowledged.size, 'nothing unacknowledged was stored');
      // The LISTEN connection was cut too, and came back.
      await until(() => store.listening, { message: 'the LISTEN connection to come back' });
      const r = await store.append('after-faults', [{ type: 'x', data: null }]);
      await until(() => heads.includes(r.lastPosition), {
        message: 'the append after the faults to be heard',
      });
    } finally {
      await store.close();
    }
  });

  it('an append whose outcome is unknown is safe to send again with the same ids', async () => {
    const store = await ctx.openStore();
    const killer = new pg.Client({ connectionString: ctx.db.connectionString });
    await killer.connect();
    try {
      const stream = 'unknown-outcome';
      const batch: NewEvent[] = [
        { id: randomUUID(), type: 'paid', data: { amount: 10 } },
        { id: randomUUID(), type: 'receipt', data: null },
      ];
      // A raw client commits the append and loses its connection before it could read the answer:
      // from its point of view the outcome is unknown.
      const raw = new pg.Client({ connectionString: ctx.db.connectionString });
      await raw.connect();
      raw.on('error', () => undefined);
      const pid = (await raw.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await raw.query('BEGIN');
      await raw.query(
        `SELECT * FROM "${store.schema}".append_batch($1::text[], $2::text[], $3::int[], $4::uuid[], $5::text[], $6::text[], $7::text[])`,
        [
          [stream],
          ['0'],
          [2],
          batch.map((e) => e.id),
          batch.map((e) => e.type),
          batch.map((e) => JSON.stringify(e.data)),
          ['{}', '{}'],
        ],
      );
      await raw.query('COMMIT');
      await killer.query('SELECT pg_terminate_backend($1)', [pid]);
      await raw.end().catch(() => undefined);
      // The caller re-sends the same batch (even with its original expected version): no second write.
      const again = await store.append(stream, batch, { expectedVersion: 0 });
      assert.equal(again.duplicate, true);
      assert.equal(again.version, 2);
      assert.deepEqual(
        again.ids,
        batch.map((e) => e.id),
      );
      assert.equal(await store.streamVersion(stream), 2);
      assert.equal(await store.headPosition(), 2);
    } finally {
      await killer.end();
      await store.close();
    }
  });
});
