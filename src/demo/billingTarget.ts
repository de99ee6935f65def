// The demo's billing_v2 projection in its SQLite target: invoice totals per invoice, plus one row per
// handler application (no unique key, so a doubled application would show up as two rows).
import Database from 'better-sqlite3';
import type { RecordedEvent } from '../core/event.js';
import { LEDGER_OF_CONSUMER } from '../sqlite/ledgerSql.js';
import type { InvoiceTotals } from './workload.js';

export const CONSUMER_NAME = 'billing_v2';
export const BILLING_FILTER = { types: ['invoice.issued', 'invoice.line_added', 'invoice.paid'] };

export const BILLING_SCHEMA = `
CREATE TABLE IF NOT EXISTS invoice_totals (
  invoice_id TEXT PRIMARY KEY,
  customer   TEXT,
  total      INTEGER NOT NULL DEFAULT 0,
  paid       INTEGER NOT NULL DEFAULT 0,
  events     INTEGER NOT NULL DEFAULT 0,
  version    INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS applied_events (
  event_id TEXT NOT NULL,
  stream   TEXT NOT NULL,
  version  INTEGER NOT NULL,
  position INTEGER NOT NULL
);`;

/** The handler: `db` is the target's connection, inside the batch transaction when the handler runs. */
export function billingHandler(db: Database.Database): (event: RecordedEvent) => void {
  const upsert = db.prepare(
    `INSERT INTO invoice_totals (invoice_id, customer, total, paid, events, version) VALUES (?, ?, ?, ?, 1, ?)
     ON CONFLICT (invoice_id) DO UPDATE SET
       customer = coalesce(excluded.customer, customer),
       total = total + excluded.total,
       paid = paid + excluded.paid,
       events = events + 1,
       version = excluded.version`,
  );
  const applied = db.prepare(
    'INSERT INTO applied_events (event_id, stream, version, position) VALUES (?, ?, ?, ?)',
  );
  return (e) => {
    const d = e.data as { customer?: string; amount?: number };
    const line = e.type === 'invoice.line_added' ? (d.amount ?? 0) : 0;
    const paid = e.type === 'invoice.paid' ? (d.amount ?? 0) : 0;
    // Increments: correct only because the guards apply each event once.
    upsert.run(e.stream, e.type === 'invoice.issued' ? (d.customer ?? null) : null, line, paid, e.version);
    applied.run(e.id, e.stream, e.version, e.position);
  };
}

/** What the target holds, read through its own read-only connection. */
export interface TargetSnapshot {
  invoices: Map<string, InvoiceTotals>;
  /** Committed handler applications per event id. */
  applications: Map<string, number>;
  ledgerRows: number;
  checkpoint: number;
}

export function readTarget(path: string): TargetSnapshot {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    const rows = db
      .prepare('SELECT invoice_id, customer, total, paid, events, version FROM invoice_totals')
      .all() as {
      invoice_id: string;
      customer: string | null;
      total: number;
      paid: number;
      events: number;
      version: number;
    }[];
    const invoices = new Map(
      rows.map((r) => [
        r.invoice_id,
        { customer: r.customer, total: r.total, paid: r.paid, events: r.events, version: r.version },
      ]),
    );
    const counts = db
      .prepare('SELECT event_id, count(*) AS n FROM applied_events GROUP BY event_id')
      .all() as { event_id: string; n: number }[];
    return {
      invoices,
      applications: new Map(counts.map((c) => [c.event_id, c.n])),
      ledgerRows: (
        db.prepare(`SELECT count(*) AS n ${LEDGER_OF_CONSUMER}`).get(CONSUMER_NAME) as {
          n: number;
        }
      ).n,
      checkpoint: readCheckpointFrom(db),
    };
  } finally {
    db.close();
  }
}

/** The consumer's committed checkpoint in the target (0 before the first commit or before the file exists). */
export function readCheckpoint(path: string): number {
  let db: Database.Database;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
  } catch {
    return 0;
  }
  try {
    return readCheckpointFrom(db);
  } catch {
    return 0; // not migrated yet
  } finally {
    db.close();
  }
}

function readCheckpointFrom(db: Database.Database): number {
  const row = db.prepare('SELECT position FROM idem_checkpoints WHERE consumer = ?').get(CONSUMER_NAME) as
    { position: number } | undefined;
  return row?.position ?? 0;
}
