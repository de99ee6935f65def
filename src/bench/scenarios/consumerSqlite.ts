import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { EventStore } from '../../core/eventStore.js';
import { DEFAULT_CATCH_UP_BATCH } from '../../consumer/options.js';
import { openSqliteStore, sqliteTarget } from '../../sqlite/index.js';
import {
  billingChange,
  SQLITE_BILLING_DDL,
  SQLITE_BILLING_UPSERT,
  SQLITE_BILLING_UPSERT_SET,
  sqliteBilledEvents,
  sqliteBillingBatchHandler,
  sqliteBillingHandler,
} from '../billing.js';
import { timeConsumer, type ConsumerRunSpec } from '../consumerRun.js';
import { baselineRow, inRounds, row, timed, type Timed } from '../measure.js';
import type { BenchRow, Scenario, ScenarioContext } from '../types.js';
import { populate } from '../workload.js';

const NAME = 'consumer-sqlite';

/** Events per transaction of idem's default catch-up (`batch.catchUpSize`), and of the baselines read beside it. */
const CATCH_UP = DEFAULT_CATCH_UP_BATCH;
/** Events per page (`batch.size`, the default), and per transaction of the baselines read beside the page-by-page row. */
const PAGE = 500;

const LEDGER_DDL = `
  CREATE TABLE IF NOT EXISTS processed (
    consumer TEXT NOT NULL, key TEXT NOT NULL, position INTEGER NOT NULL, PRIMARY KEY (consumer, key)
  ) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS checkpoints (consumer TEXT PRIMARY KEY, position INTEGER NOT NULL) WITHOUT ROWID`;

/** A target database file as a user would open it: WAL, synchronous=FULL. */
export function openTargetDb(dir: string, name: string): Database.Database {
  const db = new Database(join(dir, `${name}.db`));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(SQLITE_BILLING_DDL);
  return db;
}

export function checkBilled(db: Database.Database, expected: number, what: string): void {
  const billed = sqliteBilledEvents(db);
  if (billed !== expected) throw new Error(`${what}: billed ${billed} events, expected ${expected}`);
}

/** The naive loop: one transaction per event (check ledger, upsert, insert ledger, commit). */
async function naiveLoop(source: EventStore, db: Database.Database, n: number): Promise<void> {
  db.exec(LEDGER_DDL);
  const seen = db.prepare('SELECT 1 FROM processed WHERE consumer = ? AND key = ?');
  const upsert = db.prepare(SQLITE_BILLING_UPSERT);
  const mark = db.prepare('INSERT INTO processed (consumer, key, position) VALUES (?, ?, ?)');
  const one = db.transaction((id: string, position: number, c: ReturnType<typeof billingChange>) => {
    if (seen.get('naive', id)) return;
    upsert.run(c.customer, c.invoiced, c.paid);
    mark.run('naive', id, position);
  });
  for await (const e of source.readAll({ limit: n })) one.immediate(e.id, e.position, billingChange(e));
}

/** The set-based batch without idem: per `batchSize` events one transaction of set statements (ledger check, upsert, ledger, checkpoint). */
async function setBased(source: EventStore, db: Database.Database, batchSize: number): Promise<void> {
  db.exec(LEDGER_DDL);
  const seen = db.prepare(
    "SELECT key FROM processed WHERE consumer = 'set' AND key IN (SELECT value FROM json_each(?))",
  );
  const upsert = db.prepare(SQLITE_BILLING_UPSERT_SET);
  const mark = db.prepare(`
    INSERT INTO processed (consumer, key, position)
    SELECT 'set', json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?)`);
  const checkpoint = db.prepare(
    "INSERT INTO checkpoints (consumer, position) VALUES ('set', ?) ON CONFLICT (consumer) DO UPDATE SET position = excluded.position",
  );
  const apply = db.transaction((batch: BaselineItem[]) => {
    const done = new Set(
      (seen.all(JSON.stringify(batch.map((b) => b.id))) as { key: string }[]).map((r) => r.key),
    );
    const fresh = batch.filter((b) => !done.has(b.id));
    upsert.run(JSON.stringify(fresh.map((b) => [b.c.customer, b.c.invoiced, b.c.paid])));
    mark.run(JSON.stringify(fresh.map((b) => [b.id, b.position])));
    checkpoint.run(batch[batch.length - 1]!.position);
  });
  await inBatches(source, batchSize, (batch) => apply.immediate(batch));
}

export type BaselineItem = { id: string; position: number; c: ReturnType<typeof billingChange> };

/** Reads the whole log and hands it to `apply` in batches of `batchSize` (the baselines' loop). */
async function inBatches(
  source: EventStore,
  batchSize: number,
  apply: (batch: BaselineItem[]) => void,
): Promise<void> {
  let batch: BaselineItem[] = [];
  for await (const e of source.readAll()) {
    batch.push({ id: e.id, position: e.position, c: billingChange(e) });
    if (batch.length === batchSize) {
      apply(batch);
      batch = [];
    }
  }
  if (batch.length > 0) apply(batch);
}

/**
 * The same batches as `setBased`, written with prepared row statements in a loop (ledger check, upsert
 * and ledger insert per event) instead of statements over a JSON array. On SQLite there is no round
 * trip per statement, and the target's own ledger writes are such loops (they were a third faster
 * than json_each for 500 rows), so this is the stronger hand-written baseline to read beside the
 * set-based one.
 */
async function preparedLoop(source: EventStore, db: Database.Database, batchSize: number): Promise<void> {
  const apply = preparedLoopTransaction(db, 'loop');
  await inBatches(source, batchSize, apply);
}

/**
 * The prepared-statement loop's transaction, run as `BEGIN IMMEDIATE`: per event a ledger check, the
 * billing upsert and a ledger insert, then the checkpoint. Creates its ledger tables.
 */
export function preparedLoopTransaction(
  db: Database.Database,
  consumer: string,
): (batch: BaselineItem[]) => void {
  db.exec(LEDGER_DDL);
  const seen = db.prepare('SELECT 1 FROM processed WHERE consumer = ? AND key = ?').pluck();
  const upsert = db.prepare(SQLITE_BILLING_UPSERT);
  const mark = db.prepare('INSERT INTO processed (consumer, key, position) VALUES (?, ?, ?)');
  const checkpoint = db.prepare(
    'INSERT INTO checkpoints (consumer, position) VALUES (?, ?) ON CONFLICT (consumer) DO UPDATE SET position = excluded.position',
  );
  const apply = db.transaction((batch: BaselineItem[]) => {
    for (const b of batch) {
      if (seen.get(consumer, b.id) !== undefined) continue;
      upsert.run(b.c.customer, b.c.invoiced, b.c.paid);
      mark.run(consumer, b.id, b.position);
    }
    checkpoint.run(consumer, batch[batch.length - 1]!.position);
  });
  return (batch) => apply.immediate(batch);
}

/** Runs the billing consumer on a fresh target file and checks that it billed every event once. */
async function runIdem(
  dir: string,
  file: string,
  source: EventStore,
  n: number,
  handler: (
    db: Database.Database,
  ) => Pick<ConsumerRunSpec<Database.Database>, 'handle' | 'handleBatch' | 'batch'>,
): Promise<Timed> {
  const db = openTargetDb(dir, file);
  const target = sqliteTarget(db);
  try {
    // Each run is its own consumer of the source (its own cursor there).
    const measured = await timeConsumer({ name: `billing_${file}_v1`, source, target, ...handler(db) }, n);
    checkBilled(db, n, `idem consumer (${file})`);
    return measured;
  } finally {
    await target.close();
    db.close();
  }
}

/** Scenario 4: the idempotent consumer on a SQLite target (embedded store as source). */
export const consumerSqlite: Scenario = {
  name: NAME,
  description:
    'idempotent billing consumer, SQLite store -> SQLite target, vs naive loop and set-based batch',
  needs: [],
  async run(ctx: ScenarioContext) {
    const n = ctx.size(5_000, 100_000, 500);
    const nNaive = ctx.size(100, 1_000);
    const dir = await ctx.tempDir();
    const source = await openSqliteStore({ path: join(dir, 'source.db'), durability: 'full' });
    const randomIds = await openSqliteStore({ path: join(dir, 'source-v4.db'), durability: 'full' });
    try {
      ctx.log(`${NAME}: populating the source with ${n} events (UUIDv7 ids, as idem makes them)`);
      await populate(source, n, { ids: 'v7' });

      ctx.log(`${NAME}: baseline naive loop (${nNaive})`);
      const naiveDb = openTargetDb(dir, 'naive');
      const naive = await timed(nNaive, () => naiveLoop(source, naiveDb, nNaive));
      checkBilled(naiveDb, nNaive, 'naive loop');
      naiveDb.close();
      const naiveRow = baselineRow(NAME, 'naive loop, 1 tx/event', naive);
      let runs = 0;

      const baseline = async (what: 'set' | 'loop', size: number): Promise<Timed> => {
        const db = openTargetDb(dir, `${what}_${size}_${++runs}`);
        try {
          const t = await timed(n, () => (what === 'set' ? setBased : preparedLoop)(source, db, size));
          checkBilled(db, n, `${what === 'set' ? 'set-based batch' : 'prepared-statement loop'} of ${size}`);
          return t;
        } finally {
          db.close();
        }
      };
      // The target rows and the baselines they are read against run ctx.rounds times, interleaved
      // (rows give the median round); each run is a new consumer into a new target file.
      const m = await inRounds(
        ctx.rounds,
        {
          setPage: { events: n, run: () => baseline('set', PAGE) },
          loopPage: { events: n, run: () => baseline('loop', PAGE) },
          set: { events: n, run: () => baseline('set', CATCH_UP) },
          loop: { events: n, run: () => baseline('loop', CATCH_UP) },
          handle: {
            events: n,
            run: () =>
              runIdem(dir, `idem_${++runs}`, source, n, (db) => ({ handle: sqliteBillingHandler(db) })),
          },
          handleBatch: {
            events: n,
            run: () =>
              runIdem(dir, `idem_batch_${++runs}`, source, n, (db) => ({
                handleBatch: sqliteBillingBatchHandler(db),
              })),
          },
          perPage: {
            events: n,
            run: () =>
              runIdem(dir, `idem_page_${++runs}`, source, n, (db) => ({
                handle: sqliteBillingHandler(db),
                batch: { size: PAGE, catchUpSize: PAGE },
              })),
          },
        },
        { log: (message) => ctx.log(`${NAME}: ${message}`), warmUp: false },
      );
      const per = (size: number): string => `${size.toLocaleString('en-US')} per transaction, no idem`;
      const setPageRow = baselineRow(NAME, `set-based batch, ${per(PAGE)}`, m.setPage);
      const loopPageRow = baselineRow(NAME, `prepared-statement loop, ${per(PAGE)}`, m.loopPage);
      const setRow = baselineRow(NAME, `set-based batch, ${per(CATCH_UP)}`, m.set);
      const loopRow = baselineRow(NAME, `prepared-statement loop, ${per(CATCH_UP)}`, m.loop);

      ctx.log(`${NAME}: idem consumer, per-event handler, source with random v4 ids (${n})`);
      await populate(randomIds, n, { ids: 'v4' });
      const v4 = await runIdem(dir, `idem_v4_${++runs}`, randomIds, n, (db) => ({
        handle: sqliteBillingHandler(db),
      }));

      const defaults = `pages of ${PAGE}, catch-up transactions of up to ${CATCH_UP.toLocaleString('en-US')}`;
      const target = (t: Timed): { text: string; met: boolean } => ({
        text: '>= 100,000 events/s',
        met: t.eventsPerSec >= 100_000,
      });
      return [
        naiveRow,
        setPageRow,
        loopPageRow,
        setRow,
        loopRow,
        row({
          scenario: NAME,
          shape: `billing handler (handle), event-id + entity-version, ${defaults}, vs naive`,
          measured: m.handle,
          against: naiveRow,
          target: target(m.handle),
        }),
        row({
          scenario: NAME,
          shape: `billing handler (handle), ${defaults}, vs set-based of the same size`,
          measured: m.handle,
          against: setRow,
        }),
        row({
          scenario: NAME,
          shape: `billing handler (handle), ${defaults}, vs prepared loop of the same size`,
          measured: m.handle,
          against: loopRow,
        }),
        row({
          scenario: NAME,
          shape: `billing batch handler (handleBatch: one upsert per batch), ${defaults}, vs set-based of the same size`,
          measured: m.handleBatch,
          against: setRow,
          target: target(m.handleBatch),
        }),
        // Informative rows.
        row({
          scenario: NAME,
          shape: `billing handler (handle), a transaction per page of ${PAGE}, vs prepared loop of the same size`,
          measured: m.perPage,
          against: loopPageRow,
        }),
        row({
          scenario: NAME,
          shape: `billing handler (handle), ${defaults}, source with random v4 event ids`,
          measured: v4,
        }),
      ] satisfies BenchRow[];
    } finally {
      await randomIds.close();
      await source.close();
    }
  },
};
