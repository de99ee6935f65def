import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import pg from 'pg';
import type { RecordedEvent } from '../../src/core/event.js';
import { randomConsumer } from '../support/names.js';
import { until } from '../support/until.js';
import { pgTestContext } from './pgFixtures.js';

const ctx = await pgTestContext();

const WRITERS = 6;
const TXS_PER_WRITER = 12;

/**
 * One writer: transactions that append through the store's own SQL function, then stay open for a
 * random time (holding whatever they hold) before committing, or (every fifth) rolling back.
 * Returns the ids of the events it committed.
 */
async function heldWriter(
  connectionString: string,
  schema: string,
  w: number,
): Promise<{ committed: string[]; rolledBack: string[] }> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  const committed: string[] = [];
  const rolledBack: string[] = [];
  try {
    for (let t = 0; t < TXS_PER_WRITER; t++) {
      const n = 1 + ((w + t) % 4);
      const ids = Array.from({ length: n }, () => randomUUID());
      await client.query('BEGIN');
      await client.query(
        `SELECT * FROM "${schema}".append_batch($1::text[], $2::text[], $3::int[], $4::uuid[], $5::text[], $6::text[], $7::text[])`,
        [
          [`held-${w}`],
          ['any'],
          [n],
          ids,
          ids.map(() => 'held'),
          ids.map((_, k) => JSON.stringify({ w, t, k })),
          ids.map(() => '{}'),
        ],
      );
      // Hold the transaction open for 0-25 ms, server-side.
      await client.query('SELECT pg_sleep($1)', [Math.random() * 0.025]);
      if (t % 5 === 4) {
        await client.query('ROLLBACK');
        rolledBack.push(...ids);
      } else {
        await client.query('COMMIT');
        committed.push(...ids);
      }
    }
  } finally {
    await client.end();
  }
  return { committed, rolledBack };
}

describe('postgres global order: no reader skips a late commit', { skip: ctx.skip }, () => {
  it('a tailing reader and a subscriber see every committed event exactly once, in position order', async () => {
    const store = await ctx.openStore();
    const other = await ctx.openStore({ schema: store.schema });
    const sub = await store.subscribe(randomConsumer('tail'));
    const delivered: RecordedEvent[] = [];
    const tailed: RecordedEvent[] = [];
    let stopTail = false;
    try {
      // The subscriber: live delivery through the engine (LISTEN/NOTIFY wake-ups).
      const subscriber = (async () => {
        for await (const m of sub) {
          if (m.kind !== 'events') continue;
          delivered.push(...m.events);
          await sub.ack(m.events[m.events.length - 1]!.position);
        }
      })();
      // The tailer: readAll after its cursor, as fast as it can, woken by every notification.
      const tailer = (async () => {
        let cursor = 0;
        while (!stopTail) {
          for await (const e of store.readAll({ after: cursor })) {
            tailed.push(e);
            cursor = e.position;
          }
          await new Promise<void>((resolve) => {
            const off = store.onAppend(() => {
              off();
              resolve();
            });
            setTimeout(() => {
              off();
              resolve();
            }, 20);
          });
        }
      })();
      // Held transactions race with ordinary appends from another store (another pool).
      const plain: string[] = [];
      const plainWriter = (async () => {
        for (let i = 0; i < 40; i++) {
          const r = await other.append(`plain-${i % 3}`, [
            { type: 'plain', data: { i } },
            { type: 'plain', data: { i, second: true } },
          ]);
          plain.push(...r.ids);
        }
      })();
      const results = await Promise.all(
        Array.from({ length: WRITERS }, (_, w) => heldWriter(ctx.db.connectionString, store.schema, w)),
      );
      await plainWriter;
      const committed = new Set([...results.flatMap((r) => r.committed), ...plain]);
      const rolledBack = new Set(results.flatMap((r) => r.rolledBack));
      const head = await store.headPosition();
      assert.equal(head, committed.size, 'positions are gap-free: the head counts the committed events');
      await until(() => tailed.length >= committed.size && delivered.length >= committed.size, {
        timeoutMs: 20_000,
        message: `reader and subscriber to reach ${committed.size} events`,
      });
      stopTail = true;
      await tailer;
      await sub.close();
      await subscriber;

      for (const [name, seen] of [
        ['tailing reader', tailed],
        ['subscriber', delivered],
      ] as const) {
        const ids = seen.map((e) => e.id);
        const lost = [...committed].filter((id) => !ids.includes(id)).length;
        const doubled = ids.length - new Set(ids).size;
        const outOfOrder = seen.filter((e, i) => i > 0 && e.position <= seen[i - 1]!.position).length;
        const phantom = ids.filter((id) => rolledBack.has(id)).length;
        console.log(
          `# ${name}: ${seen.length} seen, lost ${lost}, doubled ${doubled}, out of order ${outOfOrder}, rolled back but seen ${phantom}`,
        );
        assert.equal(lost, 0);
        assert.equal(doubled, 0);
        assert.equal(outOfOrder, 0);
        assert.equal(phantom, 0);
        assert.deepEqual(
          seen.map((e) => e.position),
          Array.from({ length: committed.size }, (_, i) => i + 1),
        );
      }
      assert.ok(rolledBack.size > 0, 'some transactions rolled back');
    } finally {
      stopTail = true;
      await sub.close();
      await other.close();
      await store.close();
    }
  });
});
