import type Database from 'better-sqlite3';
import type { PoolClient } from 'pg';
import type { RecordedEvent } from '../core/event.js';

/**
 * The billing workload of the consumer scenarios: per event, one upsert of the customer's account
 * (amount invoiced or paid, and an event count that must end equal to the number of events).
 */
export interface BillingChange {
  customer: string;
  invoiced: number;
  paid: number;
}

export function billingChange(e: Pick<RecordedEvent, 'type' | 'data'>): BillingChange {
  const d = e.data as { customer: string; amount: number };
  const paid = e.type === 'invoice.paid';
  return { customer: d.customer, invoiced: paid ? 0 : d.amount, paid: paid ? d.amount : 0 };
}

// --- SQLite -------------------------------------------------------------------------------------

export const SQLITE_BILLING_DDL = `
  CREATE TABLE IF NOT EXISTS billing_accounts (
    customer TEXT PRIMARY KEY,
    invoiced INTEGER NOT NULL,
    paid     INTEGER NOT NULL,
    events   INTEGER NOT NULL
  ) WITHOUT ROWID`;

export const SQLITE_BILLING_UPSERT = `
  INSERT INTO billing_accounts (customer, invoiced, paid, events) VALUES (?, ?, ?, 1)
  ON CONFLICT (customer) DO UPDATE SET invoiced = invoiced + excluded.invoiced,
    paid = paid + excluded.paid, events = events + 1`;

/** The handler: one upsert per event on the target's connection (inside the batch transaction). */
export function sqliteBillingHandler(
  db: Database.Database,
): (e: RecordedEvent, ctx: { tx: Database.Database }) => void {
  const upsert = db.prepare(SQLITE_BILLING_UPSERT);
  return (e) => {
    const c = billingChange(e);
    upsert.run(c.customer, c.invoiced, c.paid);
  };
}

/** The set-based upsert of a batch, summed per customer: one statement for all the events (a JSON array of [customer, invoiced, paid]). */
export const SQLITE_BILLING_UPSERT_SET = `
  INSERT INTO billing_accounts (customer, invoiced, paid, events)
  SELECT json_extract(value, '$[0]'), sum(json_extract(value, '$[1]')), sum(json_extract(value, '$[2]')), count(*)
  FROM json_each(?) WHERE true GROUP BY 1
  ON CONFLICT (customer) DO UPDATE SET invoiced = invoiced + excluded.invoiced,
    paid = paid + excluded.paid, events = events + excluded.events`;

/** The batch handler (`handleBatch`): the batch's new events in one set-based upsert on the target's connection. */
export function sqliteBillingBatchHandler(
  db: Database.Database,
): (events: RecordedEvent[], ctx: { tx: Database.Database }) => void {
  const upsert = db.prepare(SQLITE_BILLING_UPSERT_SET);
  return (events) => {
    upsert.run(
      JSON.stringify(
        events.map((e) => {
          const c = billingChange(e);
          return [c.customer, c.invoiced, c.paid];
        }),
      ),
    );
  };
}

export function sqliteBilledEvents(db: Database.Database): number {
  return (db.prepare('SELECT coalesce(sum(events), 0) AS n FROM billing_accounts').get() as { n: number }).n;
}

// --- PostgreSQL ---------------------------------------------------------------------------------

export const PG_BILLING_DDL = `
  CREATE TABLE IF NOT EXISTS billing_accounts (
    customer text PRIMARY KEY,
    invoiced bigint  NOT NULL,
    paid     bigint  NOT NULL,
    events   integer NOT NULL
  )`;

export const PG_BILLING_UPSERT = `
  INSERT INTO billing_accounts (customer, invoiced, paid, events) VALUES ($1, $2, $3, 1)
  ON CONFLICT (customer) DO UPDATE SET invoiced = billing_accounts.invoiced + excluded.invoiced,
    paid = billing_accounts.paid + excluded.paid, events = billing_accounts.events + 1`;

/** The handler: one upsert per event through `ctx.tx` (a pool client inside BEGIN), as a named prepared statement. */
export async function pgBillingHandler(e: RecordedEvent, ctx: { tx: PoolClient }): Promise<void> {
  const c = billingChange(e);
  await ctx.tx.query({
    name: 'bench_billing_upsert',
    text: PG_BILLING_UPSERT,
    values: [c.customer, c.invoiced, c.paid],
  });
}

/** The set-based form of the same upsert: one statement for a whole batch, summed per customer. */
export const PG_BILLING_UPSERT_SET = `
  INSERT INTO billing_accounts (customer, invoiced, paid, events)
  SELECT c, sum(i), sum(p), count(*) FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS t(c, i, p) GROUP BY c
  ON CONFLICT (customer) DO UPDATE SET invoiced = billing_accounts.invoiced + excluded.invoiced,
    paid = billing_accounts.paid + excluded.paid, events = billing_accounts.events + excluded.events`;

/** The batch handler (`handleBatch`): the batch's new events in one set-based upsert through `ctx.tx`. */
export async function pgBillingBatchHandler(events: RecordedEvent[], ctx: { tx: PoolClient }): Promise<void> {
  const customers: string[] = [];
  const invoiced: number[] = [];
  const paid: number[] = [];
  for (const e of events) {
    const c = billingChange(e);
    customers.push(c.customer);
    invoiced.push(c.invoiced);
    paid.push(c.paid);
  }
  await ctx.tx.query({
    name: 'bench_billing_upsert_set',
    text: PG_BILLING_UPSERT_SET,
    values: [customers, invoiced, paid],
  });
}

/**
 * Per entity rather than per customer: one row per stream, as a projection keyed by its entity keeps
 * it (the members of a consumer group then never write the same row).
 */
export const PG_ENTITY_DDL = `
  CREATE TABLE IF NOT EXISTS entity_accounts (
    stream text PRIMARY KEY, amount bigint NOT NULL, events integer NOT NULL
  )`;

const PG_ENTITY_UPSERT = `INSERT INTO entity_accounts (stream, amount, events) VALUES ($1, $2, 1)
  ON CONFLICT (stream) DO UPDATE SET amount = entity_accounts.amount + excluded.amount,
    events = entity_accounts.events + 1`;

/** The per-entity handler: one upsert per event through `ctx.tx`, as a named prepared statement. */
export async function pgEntityHandler(e: RecordedEvent, ctx: { tx: PoolClient }): Promise<void> {
  await ctx.tx.query({
    name: 'bench_entity_upsert',
    text: PG_ENTITY_UPSERT,
    values: [e.stream, (e.data as { amount: number }).amount],
  });
}
