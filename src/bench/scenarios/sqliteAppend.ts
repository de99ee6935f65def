import { join } from 'node:path';
import { openSqliteStore } from '../../sqlite/index.js';
import { baselineRow, concurrently, row, timed } from '../measure.js';
import { RawSqliteEvents } from '../rawSqlite.js';
import type { BenchRow, Scenario, ScenarioContext } from '../types.js';
import { newEvent, rawRow, streamOf, type RawRow } from '../workload.js';

const NAME = 'sqlite-append';

function sizes(ctx: ScenarioContext): { single: number; concurrent: number; batched: number } {
  return {
    single: ctx.size(200, 2_000),
    concurrent: ctx.size(2_000, 20_000, 16),
    batched: ctx.size(20_000, 200_000, 1000),
  };
}

function rows(n: number): RawRow[] {
  return Array.from({ length: n }, (_, i) => rawRow(i));
}

async function rawBaseline(ctx: ScenarioContext, n: number, perTx: number): Promise<BenchRow> {
  const dir = await ctx.tempDir();
  const raw = new RawSqliteEvents(dir, 'raw');
  const all = rows(n);
  try {
    const t = await timed(n, () => {
      for (let i = 0; i < n; i += perTx) raw.write(all.slice(i, i + perTx));
    });
    return baselineRow(
      NAME,
      perTx === 1 ? 'raw better-sqlite3, 1 row/tx' : `raw better-sqlite3, ${perTx} rows/tx`,
      t,
    );
  } finally {
    raw.close();
  }
}

async function withStore<T>(
  ctx: ScenarioContext,
  fn: (store: Awaited<ReturnType<typeof openSqliteStore>>) => Promise<T>,
): Promise<T> {
  const dir = await ctx.tempDir();
  const store = await openSqliteStore({ path: join(dir, 'idem.db'), durability: 'full' });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

/** Scenario 1: appends to the embedded store with durability full, against raw better-sqlite3. */
export const sqliteAppend: Scenario = {
  name: NAME,
  description: 'append to the embedded SQLite store (durability full) vs raw better-sqlite3 inserts',
  needs: [],
  async run(ctx) {
    const n = sizes(ctx);
    const out: BenchRow[] = [];

    ctx.log(`${NAME}: baselines`);
    const perRow = await rawBaseline(ctx, n.single, 1);
    const perThousand = await rawBaseline(ctx, n.batched, 1000);
    out.push(perRow, perThousand);

    ctx.log(`${NAME}: 1 event/call sequential (${n.single})`);
    const single = await withStore(ctx, async (store) => {
      const events = Array.from({ length: n.single }, (_, i) => newEvent(i));
      return timed(n.single, async () => {
        for (let i = 0; i < n.single; i++) await store.append(streamOf(i), [events[i]!]);
      });
    });
    out.push(row({ scenario: NAME, shape: '1 event/call, sequential', measured: single, against: perRow }));

    ctx.log(`${NAME}: 1 event/call, 16 concurrent callers (${n.concurrent})`);
    const concurrent = await withStore(ctx, async (store) => {
      const events = Array.from({ length: n.concurrent }, (_, i) => newEvent(i));
      return timed(n.concurrent, () =>
        concurrently(16, n.concurrent, async (i) => void (await store.append(streamOf(i), [events[i]!]))),
      );
    });
    const ratio = concurrent.eventsPerSec / perRow.eventsPerSec;
    out.push(
      row({
        scenario: NAME,
        shape: '1 event/call, 16 concurrent callers',
        measured: concurrent,
        against: perRow,
        target: { text: '>= 10x 1 row/tx', met: ratio >= 10 },
      }),
    );

    ctx.log(`${NAME}: 100 events/call (${n.batched})`);
    const batched = await withStore(ctx, async (store) => {
      const calls = n.batched / 100;
      const batches = Array.from({ length: calls }, (_, c) =>
        Array.from({ length: 100 }, (_, j) => newEvent(c * 100 + j)),
      );
      return timed(n.batched, async () => {
        for (let c = 0; c < calls; c++) await store.append(streamOf(c), batches[c]!);
      });
    });
    out.push(
      row({
        scenario: NAME,
        shape: '100 events/call, sequential',
        measured: batched,
        against: perThousand,
        target: { text: '>= 150,000 events/s', met: batched.eventsPerSec >= 150_000 },
      }),
    );
    return out;
  },
};
