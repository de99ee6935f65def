import { openPostgresStore, type PostgresEventStore } from '../../postgres/index.js';
import { baselineRow, row, timed } from '../measure.js';
import { RawPostgresEvents } from '../rawPostgres.js';
import { loadPgModule } from '../resources.js';
import type { BenchRow, Scenario, ScenarioContext } from '../types.js';
import { rawRow } from '../workload.js';
import { appendInCalls } from './sqliteAppend.js';

const NAME = 'postgres-append';

function sizes(ctx: ScenarioContext): {
  single: number;
  concurrent: number;
  batchedSequential: number;
  batched: number;
} {
  return {
    single: ctx.size(100, 1_000),
    concurrent: ctx.size(1_600, 10_000, 16),
    batchedSequential: ctx.size(2_000, 20_000, 100),
    batched: ctx.size(9_600, 100_000, 1_600),
  };
}

async function rawBaseline(ctx: ScenarioContext, n: number, perStatement: number): Promise<BenchRow> {
  const raw = await RawPostgresEvents.open(await loadPgModule(), await ctx.postgresDatabase());
  const rows = Array.from({ length: n }, (_, i) => rawRow(i));
  try {
    const t = await timed(n, async () => {
      for (let i = 0; i < n; i += perStatement) await raw.write(rows.slice(i, i + perStatement));
    });
    return baselineRow(
      NAME,
      perStatement === 1 ? 'raw pg, single-row INSERTs' : `raw pg, ${perStatement}-row multi-VALUES INSERTs`,
      t,
    );
  } finally {
    await raw.close();
  }
}

async function withStore<T>(ctx: ScenarioContext, fn: (store: PostgresEventStore) => Promise<T>): Promise<T> {
  const store = await openPostgresStore({ connectionString: await ctx.postgresDatabase() });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

/** Scenario 2: appends to the PostgreSQL store, against raw `pg` INSERTs of the same rows. */
export const postgresAppend: Scenario = {
  name: NAME,
  description: 'append to the PostgreSQL store vs raw pg INSERTs',
  needs: ['postgres'],
  async run(ctx) {
    const n = sizes(ctx);
    const out: BenchRow[] = [];

    ctx.log(`${NAME}: baselines`);
    const single = await rawBaseline(ctx, n.single, 1);
    const multi = await rawBaseline(ctx, n.batchedSequential, 100);
    out.push(single, multi);

    ctx.log(`${NAME}: 1 event/call, sequential (${n.single})`);
    const seq = await withStore(ctx, (store) => appendInCalls(store, n.single, 1, 1));
    out.push(row({ scenario: NAME, shape: '1 event/call, sequential', measured: seq, against: single }));

    ctx.log(`${NAME}: 1 event/call, 16 concurrent callers (${n.concurrent})`);
    const concurrent = await withStore(ctx, (store) => appendInCalls(store, n.concurrent, 1, 16));
    out.push(
      row({
        scenario: NAME,
        shape: '1 event/call, 16 concurrent callers',
        measured: concurrent,
        against: single,
      }),
    );

    ctx.log(`${NAME}: 100 events/call, sequential (${n.batchedSequential})`);
    const batchedSeq = await withStore(ctx, (store) => appendInCalls(store, n.batchedSequential, 100, 1));
    out.push(
      row({ scenario: NAME, shape: '100 events/call, sequential', measured: batchedSeq, against: multi }),
    );

    ctx.log(`${NAME}: 100 events/call, 16 concurrent callers (${n.batched})`);
    const batched = await withStore(ctx, (store) => appendInCalls(store, n.batched, 100, 16));
    out.push(
      row({
        scenario: NAME,
        shape: '100 events/call, 16 concurrent callers',
        measured: batched,
        against: multi,
        target: { text: '>= 40,000 events/s', met: batched.eventsPerSec >= 40_000 },
      }),
    );
    return out;
  },
};
