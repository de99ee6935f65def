// `npm run example:billing`: the billing_v2 consumer over a temporary SQLite store, into a SQLite
// target (and a PostgreSQL target when IDEM_POSTGRES_URL is set), run twice to show that a full
// redelivery changes nothing. Prints a short summary; exits 1 if a total is wrong.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { createConsumer, type Consumer, type EventStore, type NewEvent } from '../../src/index.js';
import { openSqliteStore, sqliteTarget } from '../../src/sqlite/index.js';
import { postgresTarget } from '../../src/postgres/index.js';
import {
  BILLING_FILTER,
  POSTGRES_SCHEMA,
  type BillingEvents,
  SQLITE_SCHEMA,
  postgresBilling,
  sqliteBilling,
} from './billing.js';

const INVOICES = 300;

/** Appends invoices (every third one paid in two parts) and returns what billing must end up with. */
async function appendInvoices(store: EventStore): Promise<{ issued: number; paid: number }> {
  let issued = 0;
  let paid = 0;
  const appends: Promise<unknown>[] = [];
  for (let i = 1; i <= INVOICES; i++) {
    const invoiceId = `inv-${i}`;
    const amount = 100 + (i % 50);
    const events: NewEvent[] = [
      { type: 'invoice.issued', data: { invoiceId, customer: `customer-${i % 17}`, amount } },
    ];
    issued += amount;
    if (i % 3 === 0) {
      const half = Math.floor(amount / 2);
      events.push(
        { type: 'invoice.paid', data: { invoiceId, amount: half }, metadata: { commandId: `pay-${i}-1` } },
        {
          type: 'invoice.paid',
          data: { invoiceId, amount: amount - half },
          metadata: { commandId: `pay-${i}-2` },
        },
      );
      paid += amount;
    }
    // Noise the billing filter leaves out.
    if (i % 5 === 0) events.push({ type: 'invoice.viewed', data: { invoiceId } });
    // Concurrent appends to different streams share commits (the store's group commit).
    appends.push(store.append(`invoice-${i}`, events));
  }
  await Promise.all(appends);
  return { issued, paid };
}

async function runTwice(
  label: string,
  make: () => Consumer,
  store: EventStore,
  name: string,
): Promise<string> {
  const first = make();
  await first.start();
  await first.whenCaughtUp();
  await first.stop();
  // Rewind the store's cursor: every event is delivered again, as after a crash before the ack.
  await store.consumers.reset(name, 0);
  const second = make();
  await second.start();
  await second.whenCaughtUp();
  await second.stop();
  const a = first.metrics();
  const b = second.metrics();
  return `${label}: first run processed ${a.processed} of ${a.delivered} delivered; redelivery processed ${b.processed}, skipped ${b.duplicates} duplicates`;
}

function check(
  label: string,
  totals: { issued: number; paid: number; paidInvoices: number },
  want: { issued: number; paid: number },
): boolean {
  const ok =
    totals.issued === want.issued && totals.paid === want.paid && totals.paidInvoices === INVOICES / 3;
  console.log(
    `${label}: invoices=${INVOICES} issued=${totals.issued} paid=${totals.paid} fully_paid=${totals.paidInvoices} ` +
      `(expected issued=${want.issued} paid=${want.paid} fully_paid=${INVOICES / 3}) ${ok ? 'OK' : 'WRONG'}`,
  );
  return ok;
}

const dir = mkdtempSync(join(tmpdir(), 'idem-billing-'));
let ok = true;
try {
  const store = await openSqliteStore({ path: join(dir, 'events.db') });
  try {
    const want = await appendInvoices(store);

    // SQLite target: its own file; the handler's table lives beside the ledger.
    const db = new Database(join(dir, 'billing.db'));
    db.pragma('journal_mode = WAL');
    db.exec(SQLITE_SCHEMA);
    const target = sqliteTarget(db);
    const handle = sqliteBilling(db);
    const make = (): Consumer =>
      createConsumer<Database.Database, BillingEvents>({
        name: 'billing_v2',
        source: store,
        filter: BILLING_FILTER,
        target,
        guard: 'event-id',
        handle,
      });
    console.log(await runTwice('sqlite', make, store, 'billing_v2'));
    const t = db
      .prepare(
        `SELECT sum(amount) AS issued, sum(paid) AS paid, sum(status = 'paid') AS paidInvoices FROM invoice_status`,
      )
      .get() as { issued: number; paid: number; paidInvoices: number };
    ok = check('sqlite', t, want) && ok;
    console.log(`sqlite: ledger rows=${await target.ledgerSize('billing_v2')}`);
    await target.close();
    db.close();

    const url = process.env.IDEM_POSTGRES_URL;
    if (url) {
      const schema = `billing_example_${process.pid}`;
      // Every client of this pool writes invoice_status into the example's own schema.
      const pool = new pg.Pool({ connectionString: url, max: 4, options: `-c search_path=${schema}` });
      try {
        await pool.query(`CREATE SCHEMA ${schema}`);
        await pool.query(POSTGRES_SCHEMA);
        const pgTarget = postgresTarget(pool, { schema });
        const makePg = (): Consumer =>
          createConsumer<pg.PoolClient, BillingEvents>({
            name: 'billing_v2_pg',
            source: store,
            filter: BILLING_FILTER,
            target: pgTarget,
            handle: postgresBilling,
          });
        console.log(await runTwice('postgres', makePg, store, 'billing_v2_pg'));
        const r = await pool.query<{ issued: number; paid: number; paidinvoices: number }>(
          `SELECT sum(amount)::int AS issued, sum(paid)::int AS paid, count(*) FILTER (WHERE status = 'paid')::int AS paidInvoices
           FROM ${schema}.invoice_status`,
        );
        const row = r.rows[0]!;
        ok =
          check('postgres', { issued: row.issued, paid: row.paid, paidInvoices: row.paidinvoices }, want) &&
          ok;
      } finally {
        await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
        await pool.end();
      }
    }
  } finally {
    await store.close();
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exitCode = ok ? 0 : 1;
