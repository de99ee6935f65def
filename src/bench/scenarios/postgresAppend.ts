import { openPostgresStore, type PostgresEventStore } from '../../postgres/index.js';
import { baselineRow, row, timed } from '../measure.js';
import { RawPostgresEvents } from '../rawPostgres.js';
import { loadPgModule } from '../resources.js';
import type { BenchRow, Scenario, ScenarioContext } from '../types.js';
import { rawRow, type IdKind } from '../workload.js';
import { appendInCalls, appendSizes as sizes } from './sqliteAppend.js';

const NAME = 'postgres-append';

/**
 * Raw `pg` writing `n` rows, `perStatement` per INSERT. `ids` and `perStream` as `rawRow`: the default
 * (v4 ids, each row to the next stream) is the baseline of earlier runs; `'v7'` with `perStream` 100
 * writes the very rows that the 100-event calls write.
 */
async function rawBaseline(
  ctx: ScenarioContext,
  n: number,
  perStatement: number,
  ids: IdKind = 'v4',
  perStream = 1,
): Promise<BenchRow> {
  const raw = await RawPostgresEvents.open(await loadPgModule(), await ctx.postgresDatabase());
  const rows = Array.from({ length: n }, (_, i) => rawRow(i, ids, perStream));
  try {
    const t = await timed(n, async () => {
      for (let i = 0; i < n; i += perStatement) await raw.write(rows.slice(i, i + perStatement));
    });
    let shape =
      perStatement === 1 ? 'raw pg, single-row INSERTs' : `raw pg, ${perStatement}-row multi-VALUES INSERTs`;
    if (ids === 'v7') shape += `, UUIDv7 ids, ${perStream} rows per stream (the 100-event calls' rows)`;
    return baselineRow(NAME, shape, t);
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

    // Ids: the idem side uses UUIDv7 ids, made as idem makes them when a caller gives none (and as
    // the docs recommend for callers' ids); random v4 ids put every insert at a random place in the
    // id index (more pages touched and, after each checkpoint, more full-page images in the WAL).
    // The v4 rows (the shape of earlier runs) stay for comparison, against the v4 raw baseline.
    ctx.log(`${NAME}: baselines`);
    const single = await rawBaseline(ctx, n.single, 1);
    const multi = await rawBaseline(ctx, n.batchedSequential, 100);
    const sameRows = await rawBaseline(ctx, n.batchedSequential, 100, 'v7', 100);
    out.push(single, multi, sameRows);

    ctx.log(`${NAME}: 1 event/call, sequential (${n.single})`);
    const seq = await withStore(ctx, (store) => appendInCalls(store, n.single, 1, 1, 'v7'));
    out.push(row({ scenario: NAME, shape: '1 event/call, sequential', measured: seq, against: single }));

    ctx.log(`${NAME}: 1 event/call, 16 concurrent callers (${n.concurrent})`);
    const concurrent = await withStore(ctx, (store) => appendInCalls(store, n.concurrent, 1, 16, 'v7'));
    out.push(
      row({
        scenario: NAME,
        shape: '1 event/call, 16 concurrent callers',
        measured: concurrent,
        against: single,
      }),
    );

    ctx.log(`${NAME}: 100 events/call, sequential (${n.batchedSequential})`);
    const batchedSeq = await withStore(ctx, (store) =>
      appendInCalls(store, n.batchedSequential, 100, 1, 'v7'),
    );
    out.push(
      row({ scenario: NAME, shape: '100 events/call, sequential', measured: batchedSeq, against: sameRows }),
    );

    ctx.log(`${NAME}: 100 events/call, 16 concurrent callers, random v4 ids (${n.batched})`);
    const batchedV4 = await withStore(ctx, (store) => appendInCalls(store, n.batched, 100, 16, 'v4'));
    out.push(
      row({
        scenario: NAME,
        shape: '100 events/call, 16 concurrent callers, random v4 ids',
        measured: batchedV4,
        against: multi,
        target: { text: '>= 40,000 events/s', met: batchedV4.eventsPerSec >= 40_000 },
      }),
    );

    ctx.log(`${NAME}: 100 events/call, 16 concurrent callers (${n.batched})`);
    const batched = await withStore(ctx, (store) => appendInCalls(store, n.batched, 100, 16, 'v7'));
    out.push(
      row({
        scenario: NAME,
        shape: '100 events/call, 16 concurrent callers, UUIDv7 ids',
        measured: batched,
        against: sameRows,
        target: { text: '>= 40,000 events/s', met: batched.eventsPerSec >= 40_000 },
      }),
    );
    return out;
  },
};
