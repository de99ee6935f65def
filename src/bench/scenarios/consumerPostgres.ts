import type * as Pg from 'pg';
import type { EventStore } from '../../core/eventStore.js';
import { DEFAULT_CATCH_UP_BATCH } from '../../consumer/options.js';
import { openPostgresStore, postgresTarget } from '../../postgres/index.js';
import {
  billingChange,
  PG_BILLING_DDL,
  PG_BILLING_UPSERT,
  PG_BILLING_UPSERT_SET,
  pgBillingBatchHandler,
  pgBillingHandler,
} from '../billing.js';
import { timeConsumer, type ConsumerRunSpec } from '../consumerRun.js';
import { baselineRow, inRounds, row, timed, type Timed } from '../measure.js';
import { loadPgModule } from '../resources.js';
import type { BenchRow, Scenario, ScenarioContext } from '../types.js';
import { populate } from '../workload.js';

const NAME = 'consumer-postgres';

/** Events per transaction of idem's default catch-up (`batch.catchUpSize`), and of the baseline read beside it. */
const CATCH_UP = DEFAULT_CATCH_UP_BATCH;
/** Events per page (`batch.size`, the default), and per transaction of the baseline read beside the page-by-page row. */
const PAGE = 500;

const LEDGER_DDL = `
  CREATE TABLE IF NOT EXISTS processed (
    consumer text NOT NULL, key text NOT NULL, position bigint NOT NULL, PRIMARY KEY (consumer, key)
  );
  CREATE TABLE IF NOT EXISTS checkpoints (consumer text PRIMARY KEY, position bigint NOT NULL)`;

async function checkBilled(q: Pg.Pool | Pg.Client, expected: number, what: string): Promise<void> {
  const r = await q.query<{ n: string }>('SELECT coalesce(sum(events), 0)::text AS n FROM billing_accounts');
  const billed = Number(r.rows[0]?.n ?? 0);
  if (billed !== expected) throw new Error(`${what}: billed ${billed} events, expected ${expected}`);
}

/** The naive loop: one transaction per event (check ledger, upsert, insert ledger, commit), one client. */
async function naiveLoop(source: EventStore, client: Pg.Client, n: number): Promise<void> {
  for await (const e of source.readAll({ limit: n })) {
    const c = billingChange(e);
    await client.query('BEGIN');
    const seen = await client.query({
      name: 'seen',
      text: "SELECT 1 FROM processed WHERE consumer = 'naive' AND key = $1",
      values: [e.id],
    });
    if (seen.rowCount === 0) {
      await client.query({
        name: 'upsert',
        text: PG_BILLING_UPSERT,
        values: [c.customer, c.invoiced, c.paid],
      });
      await client.query({
        name: 'mark',
        text: "INSERT INTO processed (consumer, key, position) VALUES ('naive', $1, $2)",
        values: [e.id, e.position],
      });
    }
    await client.query('COMMIT');
  }
}

/**
 * The set-based ledger check. It was `key = ANY($1)` as a named statement; PostgreSQL cached its
 * generic plan while the ledger was empty (no statistics), which scans every ledger row of the
 * consumer and filters it by the array, which takes most of a batch's time once the ledger holds tens
 * of thousands of rows. This form probes the primary key once per id, whatever the table's size.
 */
const SET_SEEN = `SELECT u.key FROM unnest($1::text[]) AS u(key)
  CROSS JOIN LATERAL (SELECT 1 FROM processed p WHERE p.consumer = 'set' AND p.key = u.key LIMIT 1) AS hit`;

/** The set-based batch without idem: per `batchSize` events one transaction of set statements (ledger check, upsert, ledger, checkpoint). */
async function setBased(source: EventStore, client: Pg.Client, batchSize: number): Promise<void> {
  const apply = async (
    batch: { id: string; position: number; c: ReturnType<typeof billingChange> }[],
  ): Promise<void> => {
    await client.query('BEGIN');
    // An unnamed statement with one index probe per key: see SET_SEEN.
    const seen = await client.query<{ key: string }>({ text: SET_SEEN, values: [batch.map((b) => b.id)] });
    const done = new Set(seen.rows.map((r) => r.key));
    const fresh = batch.filter((b) => !done.has(b.id));
    await client.query({
      name: 'upsert_set',
      text: PG_BILLING_UPSERT_SET,
      values: [fresh.map((b) => b.c.customer), fresh.map((b) => b.c.invoiced), fresh.map((b) => b.c.paid)],
    });
    await client.query({
      name: 'mark_set',
      text: "INSERT INTO processed (consumer, key, position) SELECT 'set', k, p FROM unnest($1::text[], $2::bigint[]) AS t(k, p)",
      values: [fresh.map((b) => b.id), fresh.map((b) => b.position)],
    });
    await client.query({
      name: 'checkpoint_set',
      text: "INSERT INTO checkpoints (consumer, position) VALUES ('set', $1) ON CONFLICT (consumer) DO UPDATE SET position = excluded.position",
      values: [batch[batch.length - 1]!.position],
    });
    await client.query('COMMIT');
  };
  let batch: { id: string; position: number; c: ReturnType<typeof billingChange> }[] = [];
  for await (const e of source.readAll()) {
    batch.push({ id: e.id, position: e.position, c: billingChange(e) });
    if (batch.length === batchSize) {
      await apply(batch);
      batch = [];
    }
  }
  if (batch.length > 0) await apply(batch);
}

async function withClient<T>(ctx: ScenarioContext, fn: (client: Pg.Client) => Promise<T>): Promise<T> {
  const pg = await loadPgModule();
  const client = new pg.Client({ connectionString: await ctx.postgresDatabase() });
  await client.connect();
  try {
    await client.query(PG_BILLING_DDL);
    await client.query(LEDGER_DDL);
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Runs the billing consumer into a fresh database (its own billing table and target tables) and checks that it billed every event once. */
async function runIdem(
  ctx: ScenarioContext,
  name: string,
  source: EventStore,
  n: number,
  handler: Pick<ConsumerRunSpec<Pg.PoolClient>, 'handle' | 'handleBatch' | 'batch'>,
): Promise<Timed> {
  const pg = await loadPgModule();
  const pool = new pg.Pool({ connectionString: await ctx.postgresDatabase(), max: 4 });
  try {
    await pool.query(PG_BILLING_DDL);
    const target = postgresTarget(pool);
    const measured = await timeConsumer({ name, source, target, ...handler }, n);
    await target.close();
    await checkBilled(pool, n, `idem consumer (${name})`);
    return measured;
  } finally {
    await pool.end();
  }
}

/** Scenario 3: the idempotent consumer on a PostgreSQL target (PostgreSQL store as source). */
export const consumerPostgres: Scenario = {
  name: NAME,
  description:
    'idempotent billing consumer, PostgreSQL store -> PostgreSQL target, vs naive loop and set-based batch',
  needs: ['postgres'],
  async run(ctx) {
    const n = ctx.size(5_000, 100_000, 500);
    const nNaive = ctx.size(100, 1_000);
    const connect = async (): Promise<EventStore> =>
      openPostgresStore({ connectionString: await ctx.postgresDatabase() });
    const source = await connect();
    const randomIds = await connect();
    try {
      ctx.log(`${NAME}: populating the source with ${n} events (UUIDv7 ids, as idem makes them)`);
      await populate(source, n, { ids: 'v7' });

      ctx.log(`${NAME}: baseline naive loop (${nNaive})`);
      const naive = await withClient(ctx, async (client) => {
        const t = await timed(nNaive, () => naiveLoop(source, client, nNaive));
        await checkBilled(client, nNaive, 'naive loop');
        return t;
      });
      const naiveRow = baselineRow(NAME, 'naive loop, 1 tx/event', naive);

      const setBaseline = (size: number): Promise<Timed> =>
        withClient(ctx, async (client) => {
          const t = await timed(n, () => setBased(source, client, size));
          await checkBilled(client, n, 'set-based batch');
          return t;
        });
      // The target rows and the baselines they are read against run ctx.rounds times, interleaved
      // (rows give the median round); each run is a new consumer into a new target database.
      let runs = 0;
      const m = await inRounds(
        ctx.rounds,
        {
          setPage: { events: n, run: () => setBaseline(PAGE) },
          set: { events: n, run: () => setBaseline(CATCH_UP) },
          batched: {
            events: n,
            run: () =>
              runIdem(ctx, `billing_batch_${++runs}_v1`, source, n, { handleBatch: pgBillingBatchHandler }),
          },
          perPage: {
            events: n,
            run: () =>
              runIdem(ctx, `billing_page_${++runs}_v1`, source, n, {
                handleBatch: pgBillingBatchHandler,
                batch: { size: PAGE, catchUpSize: PAGE },
              }),
          },
        },
        { log: (message) => ctx.log(`${NAME}: ${message}`), warmUp: false },
      );
      const setNoIdem = (size: number): string =>
        `set-based batch of ${size.toLocaleString('en-US')}, no idem`;
      const setPageRow = baselineRow(NAME, setNoIdem(PAGE), m.setPage);
      const setRow = baselineRow(NAME, setNoIdem(CATCH_UP), m.set);

      // Informative rows, measured once.
      ctx.log(`${NAME}: idem consumer, per-event handler (${n})`);
      const measured = await runIdem(ctx, 'billing_v1', source, n, { handle: pgBillingHandler });
      ctx.log(`${NAME}: idem consumer, batch handler, source with random v4 ids (${n})`);
      await populate(randomIds, n, { ids: 'v4' });
      const v4 = await runIdem(ctx, 'billing_v4_v1', randomIds, n, { handleBatch: pgBillingBatchHandler });

      const defaults = `pages of ${PAGE}, catch-up transactions of up to ${CATCH_UP.toLocaleString('en-US')}`;
      const rate = m.batched.eventsPerSec;
      return [
        naiveRow,
        setPageRow,
        setRow,
        row({
          scenario: NAME,
          shape: `billing batch handler (handleBatch: one upsert per batch), ${defaults}, vs naive`,
          measured: m.batched,
          against: naiveRow,
          target: {
            text: '>= 40,000 events/s and >= 20x naive',
            met: rate >= 40_000 && rate >= 20 * naive.eventsPerSec,
          },
        }),
        row({
          scenario: NAME,
          shape: `billing batch handler (handleBatch), ${defaults}, vs set-based of the same size`,
          measured: m.batched,
          against: setRow,
          target: { text: '>= 0.7x set-based', met: rate >= 0.7 * setRow.eventsPerSec },
        }),
        // Informative rows.
        row({
          scenario: NAME,
          shape: `billing batch handler (handleBatch), a transaction per page of ${PAGE}, vs set-based of the same size`,
          measured: m.perPage,
          against: setPageRow,
        }),
        row({
          scenario: NAME,
          shape: `billing handler (handle: a round trip per event), ${defaults}, vs naive`,
          measured,
          against: naiveRow,
        }),
        row({
          scenario: NAME,
          shape: `billing batch handler (handleBatch), ${defaults}, source with random v4 event ids`,
          measured: v4,
        }),
      ] satisfies BenchRow[];
    } finally {
      await randomIds.close();
      await source.close();
    }
  },
};
