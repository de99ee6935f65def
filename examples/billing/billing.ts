// The billing_v2 consumer of the idempotent-consumer pattern:
//   begin transaction; skip if processed; upsert invoice_status from the event;
//   insert processed(event.id, "billing_v2"); commit; ack.
// idem does everything but the upsert: the handler only writes its output through ctx.tx.
import type Database from 'better-sqlite3';
import type { PoolClient } from 'pg';
import type { EventFilterOf, EventOf } from '../../src/index.js';

interface InvoiceIssued {
  invoiceId: string;
  customer: string;
  amount: number;
}
interface InvoicePaid {
  invoiceId: string;
  amount: number;
}

/** The events billing handles, by type: the type parameter of its consumers types their `data`. */
export interface BillingEvents {
  'invoice.issued': InvoiceIssued;
  'invoice.paid': InvoicePaid;
}

export const BILLING_FILTER: EventFilterOf<BillingEvents> = { types: ['invoice.issued', 'invoice.paid'] };

export const SQLITE_SCHEMA = `CREATE TABLE IF NOT EXISTS invoice_status (
  invoice_id TEXT PRIMARY KEY,
  customer   TEXT,
  amount     INTEGER NOT NULL DEFAULT 0,
  paid       INTEGER NOT NULL DEFAULT 0,
  status     TEXT    NOT NULL
)`;

/** The SQLite handler: `ctx.tx` is the target's better-sqlite3 Database, inside the batch transaction. */
export function sqliteBilling(db: Database.Database): (event: EventOf<BillingEvents>) => void {
  const issued = db.prepare(
    `INSERT INTO invoice_status (invoice_id, customer, amount, status) VALUES (?, ?, ?, 'issued')
     ON CONFLICT (invoice_id) DO UPDATE SET customer = excluded.customer, amount = excluded.amount`,
  );
  const paid = db.prepare(
    `INSERT INTO invoice_status (invoice_id, paid, status) VALUES (?, ?, 'paid')
     ON CONFLICT (invoice_id) DO UPDATE SET paid = paid + excluded.paid,
       status = CASE WHEN paid + excluded.paid >= amount THEN 'paid' ELSE 'partly paid' END`,
  );
  return (event) => {
    if (event.type === 'invoice.issued') {
      const d = event.data;
      issued.run(d.invoiceId, d.customer, d.amount);
    } else {
      const d = event.data;
      // An increment: safe only because the ledger guarantees one application per event id.
      paid.run(d.invoiceId, d.amount);
    }
  };
}

export const POSTGRES_SCHEMA = `CREATE TABLE IF NOT EXISTS invoice_status (
  invoice_id text PRIMARY KEY,
  customer   text,
  amount     integer NOT NULL DEFAULT 0,
  paid       integer NOT NULL DEFAULT 0,
  status     text    NOT NULL
)`;

/** The PostgreSQL handler: `ctx.tx` is a pool client inside BEGIN. */
export async function postgresBilling(event: EventOf<BillingEvents>, ctx: { tx: PoolClient }): Promise<void> {
  if (event.type === 'invoice.issued') {
    const d = event.data;
    await ctx.tx.query(
      `INSERT INTO invoice_status (invoice_id, customer, amount, status) VALUES ($1, $2, $3, 'issued')
       ON CONFLICT (invoice_id) DO UPDATE SET customer = excluded.customer, amount = excluded.amount`,
      [d.invoiceId, d.customer, d.amount],
    );
  } else {
    const d = event.data;
    await ctx.tx.query(
      `INSERT INTO invoice_status AS s (invoice_id, paid, status) VALUES ($1, $2, 'paid')
       ON CONFLICT (invoice_id) DO UPDATE SET paid = s.paid + excluded.paid,
         status = CASE WHEN s.paid + excluded.paid >= s.amount THEN 'paid' ELSE 'partly paid' END`,
      [d.invoiceId, d.amount],
    );
  }
}
