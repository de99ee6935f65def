import pg from 'pg';
import { createConsumer } from '../../consumer/index.js';
import type { EventStore } from '../../core/eventStore.js';
import { openPostgresStore, postgresTarget } from '../../postgres/index.js';
import { baselineRow, row, type Timed } from '../measure.js';
import type { Scenario, ScenarioContext } from '../types.js';

const NAME = 'consumer-group';
const STREAMS = 200;

/**
 * One run of `members` consumer objects over the same name (a group when `partitions` is set) with a
 * handler that waits 1 ms per event (a simulated remote call), from start until every event is
 * committed.
 */
async function timeGroup(
  source: EventStore,
  pool: pg.Pool,
  name: string,
  partitions: number | undefined,
  members: number,
  n: number,
): Promise<Timed> {
  await pool.query(`CREATE SCHEMA IF NOT EXISTS ${name}`);
  const target = postgresTarget(pool, { schema: name });
  const consumers = Array.from({ length: members }, () =>
    createConsumer({
      name,
      source,
      target,
      ...(partitions !== undefined ? { partitions } : {}),
      batch: { size: 50, catchUpSize: 50 },
      handle: () => new Promise<void>((resolve) => setTimeout(resolve, 1)),
    }),
  );
  const t0 = process.hrtime.bigint();
  try {
    for (const c of consumers) await c.start();
    await consumers[0]!.whenCaughtUp({ timeoutMs: 600_000 });
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    return { events: n, seconds, eventsPerSec: n / seconds };
  } finally {
    for (const c of consumers) await c.stop();
  }
}

/**
 * Consumer groups against the same consumer without partitions, a handler waiting 1 ms per event (the
 * case groups exist for), PostgreSQL store and target. The members run in this one process (each
 * member's partitions run concurrently on the target's pool): a lower bound for members in separate
 * processes, which `npm run faults -- --only group-` exercises.
 */
export const consumerGroup: Scenario = {
  name: NAME,
  description:
    'a consumer group (16 partitions, 1 and 4 members in one process) against one consumer, 1 ms handler, PostgreSQL',
  needs: ['postgres'],
  async run(ctx: ScenarioContext) {
    const n = ctx.size(2_000, 20_000, STREAMS);
    const url = await ctx.postgresDatabase();
    const store = await openPostgresStore({ connectionString: url });
    const pool = new pg.Pool({ connectionString: url, max: 20 });
    try {
      ctx.log(`${NAME}: appending ${n} events over ${STREAMS} streams`);
      for (let i = 0; i < n; i += STREAMS) {
        await Promise.all(
          Array.from({ length: Math.min(STREAMS, n - i) }, (_, s) =>
            store.append(`acct-${s}`, [{ type: 'moved', data: { i } }]),
          ),
        );
      }
      ctx.log(`${NAME}: one consumer`);
      const plain = baselineRow(
        NAME,
        'one consumer, no partitions',
        await timeGroup(store, pool, 'plain_v1', undefined, 1, n),
      );
      ctx.log(`${NAME}: 16 partitions, 1 member`);
      const one = await timeGroup(store, pool, 'group_one_v1', 16, 1, n);
      ctx.log(`${NAME}: 16 partitions, 4 members`);
      const four = await timeGroup(store, pool, 'group_four_v1', 16, 4, n);
      return [
        plain,
        row({
          scenario: NAME,
          shape: '16 partitions, 1 member (partitions run concurrently)',
          measured: one,
          against: plain,
        }),
        row({
          scenario: NAME,
          shape: '16 partitions, 4 members in one process',
          measured: four,
          against: plain,
          target: { text: '>= 3.5x one consumer', met: four.eventsPerSec >= 3.5 * plain.eventsPerSec },
        }),
      ];
    } finally {
      await pool.end();
      await store.close();
    }
  },
};
