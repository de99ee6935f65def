// The demo's report: the exactly-once check of the target against the store, and its text form.
import type { ConsumerMetricsSnapshot } from '../consumer/metrics.js';
import type { RecordedEvent } from '../core/event.js';
import type { TargetSnapshot } from './billingTarget.js';
import { applyInvoiceEvent, type InvoiceTotals } from './workload.js';

export interface Sums {
  invoices: number;
  total: number;
  paid: number;
  events: number;
}

/** What `runDemo` returns and `idem demo --json` prints. Every number is counted or measured in the run. */
export interface DemoReport {
  /** lost = 0, doubled = 0, no application of an unknown event, every invoice equal to the exactly-once fold. */
  ok: boolean;
  durationMs: number;
  /** The temporary directory, when kept (`--keep`); null once removed. */
  dir: string | null;
  /** Events written by the appends (duplicates excluded), invoices, append calls. */
  events: number;
  invoices: number;
  appends: number;
  duplicateAppends: { appends: number; events: number; answeredDuplicate: number };
  /** Sums over every consumer run of the consumer's own metrics. */
  delivered: number;
  duplicatesSkipped: number;
  gaps: number;
  gapsRecovered: number;
  recoveredEvents: number;
  reconnects: number;
  kills: number;
  consumerProcesses: number;
  consumerRuns: number;
  crash: {
    checkpoint: number;
    cursor: number;
    unacknowledged: number;
    redeliveredAfter: { delivered: number; duplicates: number };
  };
  reconnect: { connectionsCut: number };
  gap: { stream: string; skippedVersions: [number, number]; deliveredVersion: number; cursorMovedTo: number };
  rewind: { delivered: number; duplicates: number };
  totals: { expected: Sums; actual: Sums; invoicesEqual: number };
  /** Handler applications committed in the target, and its ledger rows. */
  applied: number;
  ledgerRows: number;
  lost: number;
  doubled: number;
  /** Applications of event ids the store does not have. */
  unexpected: number;
}

export interface Verification {
  expected: Sums;
  actual: Sums;
  invoicesEqual: number;
  applied: number;
  lost: number;
  doubled: number;
  unexpected: number;
}

/** Compares the target with an exactly-once fold of the store's events. */
export function verify(storeEvents: readonly RecordedEvent[], target: TargetSnapshot): Verification {
  const fold = new Map<string, InvoiceTotals>();
  const ids = new Set<string>();
  for (const e of storeEvents) {
    applyInvoiceEvent(fold, e);
    ids.add(e.id);
  }
  let lost = 0;
  let doubled = 0;
  let unexpected = 0;
  let applied = 0;
  for (const id of ids) if (!target.applications.has(id)) lost++;
  for (const [id, n] of target.applications) {
    applied += n;
    if (!ids.has(id)) unexpected += n;
    else if (n > 1) doubled += n - 1;
  }
  let invoicesEqual = 0;
  for (const [stream, want] of fold) {
    const have = target.invoices.get(stream);
    if (
      have &&
      have.total === want.total &&
      have.paid === want.paid &&
      have.events === want.events &&
      have.version === want.version &&
      have.customer === want.customer
    ) {
      invoicesEqual++;
    }
  }
  return {
    expected: sums(fold),
    actual: sums(target.invoices),
    invoicesEqual,
    applied,
    lost,
    doubled,
    unexpected,
  };
}

function sums(m: ReadonlyMap<string, InvoiceTotals>): Sums {
  const s: Sums = { invoices: m.size, total: 0, paid: 0, events: 0 };
  for (const t of m.values()) {
    s.total += t.total;
    s.paid += t.paid;
    s.events += t.events;
  }
  return s;
}

/** Adds up the metrics of several consumer runs. */
export function sumMetrics(runs: readonly (ConsumerMetricsSnapshot | null)[]): {
  delivered: number;
  duplicates: number;
  gaps: number;
  recovered: number;
  reconnects: number;
} {
  const out = { delivered: 0, duplicates: 0, gaps: 0, recovered: 0, reconnects: 0 };
  for (const m of runs) {
    if (!m) continue;
    out.delivered += m.delivered;
    out.duplicates += m.duplicates;
    out.gaps += m.gaps;
    out.recovered += m.recovered;
    out.reconnects += m.reconnects;
  }
  return out;
}

const n = (x: number): string => x.toLocaleString('en-US');

export function formatReport(r: DemoReport): string {
  const t = r.totals;
  const lines = [
    '',
    `idem demo: billing_v2 in ${r.consumerProcesses} consumer processes (${r.consumerRuns} runs), ${(r.durationMs / 1000).toFixed(1)} s`,
    `  events appended     ${n(r.events)} (${n(r.invoices)} invoices, ${n(r.appends)} appends); ${n(r.duplicateAppends.appends)} appends of ${n(r.duplicateAppends.events)} events sent again with the same ids, ${n(r.duplicateAppends.answeredDuplicate)} answered "duplicate"`,
    `  delivered           ${n(r.delivered)}`,
    `  duplicates skipped  ${n(r.duplicatesSkipped)} (after the kill and the reconnect: ${n(r.crash.redeliveredAfter.duplicates)}; after the rewind: ${n(r.rewind.duplicates)})`,
    `  gaps recovered      ${n(r.gapsRecovered)} of ${n(r.gaps)} (${n(r.recoveredEvents)} events read from the stream)`,
    `  kills survived      ${n(r.kills)} (SIGKILL after commit, before ack: ${n(r.crash.unacknowledged)} committed events unacknowledged)`,
    `  reconnects          ${n(r.reconnects)} (after ${n(r.reconnect.connectionsCut)} connections were cut)`,
    `  invoice totals      expected total=${n(t.expected.total)} paid=${n(t.expected.paid)} events=${n(t.expected.events)}`,
    `                      actual   total=${n(t.actual.total)} paid=${n(t.actual.paid)} events=${n(t.actual.events)}; ${n(t.invoicesEqual)}/${n(t.expected.invoices)} invoices equal`,
    `  target              ${n(r.applied)} handler applications committed, ${n(r.ledgerRows)} ledger rows`,
    `  lost=${r.lost} doubled=${r.doubled}${r.unexpected > 0 ? ` unexpected=${r.unexpected}` : ''}  ${r.ok ? 'OK' : 'FAILED'}`,
  ];
  if (r.dir) lines.push(`  data kept in ${r.dir}`);
  return `${lines.join('\n')}\n`;
}
