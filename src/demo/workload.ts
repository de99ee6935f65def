// The demo's invoices: what the parent appends, and the exactly-once fold it checks the target against.
import { randomUUID } from 'node:crypto';
import type { NewEvent, RecordedEvent } from '../core/event.js';

export const INVOICE_TYPES = ['invoice.issued', 'invoice.line_added', 'invoice.paid'] as const;

/** One `append` call: some of an invoice's events, with ids chosen up front so that it can be sent again. */
export interface AppendUnit {
  stream: string;
  events: NewEvent[];
}

export interface Workload {
  invoices: number;
  events: number;
  /** In append order: the invoices' first units, then their second units, ... (streams interleave). */
  units: AppendUnit[];
}

/** Per invoice, what billing must hold after applying each of its events exactly once. */
export interface InvoiceTotals {
  customer: string | null;
  total: number;
  paid: number;
  events: number;
  version: number;
}

/** About 10 events per invoice: issued, 3-11 lines, one payment (full for two invoices in three, half otherwise). */
export function makeWorkload(events: number): Workload {
  const perInvoice: NewEvent[][] = [];
  let count = 0;
  for (let i = 1; count < events; i++) {
    const invoiceId = `inv-${i}`;
    const list: NewEvent[] = [
      { id: randomUUID(), type: 'invoice.issued', data: { invoiceId, customer: `customer-${i % 23}` } },
    ];
    const lines = 3 + ((i * 7) % 9);
    let total = 0;
    for (let j = 1; j <= lines; j++) {
      const amount = 10 + ((i * 31 + j * 17) % 90);
      total += amount;
      list.push({ id: randomUUID(), type: 'invoice.line_added', data: { invoiceId, line: j, amount } });
    }
    const amount = i % 3 === 0 ? Math.floor(total / 2) : total;
    list.push({
      id: randomUUID(),
      type: 'invoice.paid',
      data: { invoiceId, amount },
      metadata: { commandId: `pay-${invoiceId}` },
    });
    const kept = list.slice(0, events - count);
    count += kept.length;
    perInvoice.push(kept);
  }
  // Up to four units per invoice: [issued, line 1], the first half of the other lines, the rest, the payment.
  const split = perInvoice.map((list, i) => {
    const stream = `invoice-${i + 1}`;
    const lastIsPaid = list[list.length - 1]?.type === 'invoice.paid';
    const body = lastIsPaid ? list.slice(0, -1) : list;
    const mid = 2 + Math.ceil((body.length - 2) / 2);
    const parts = [body.slice(0, 2), body.slice(2, mid), body.slice(mid), lastIsPaid ? list.slice(-1) : []];
    return parts.filter((p) => p.length > 0).map((p) => ({ stream, events: p }));
  });
  const units: AppendUnit[] = [];
  for (let round = 0; round < 4; round++) {
    for (const parts of split) {
      const unit = parts[round];
      if (unit) units.push(unit);
    }
  }
  return { invoices: perInvoice.length, events: count, units };
}

/** Applies one event to `totals`: the reference semantics of the billing handler, used once per event. */
export function applyInvoiceEvent(
  totals: Map<string, InvoiceTotals>,
  e: Pick<RecordedEvent, 'stream' | 'type' | 'version' | 'data'>,
): void {
  const t = totals.get(e.stream) ?? { customer: null, total: 0, paid: 0, events: 0, version: 0 };
  const d = e.data as { customer?: string; amount?: number };
  if (e.type === 'invoice.issued') t.customer = d.customer ?? null;
  else if (e.type === 'invoice.line_added') t.total += d.amount ?? 0;
  else if (e.type === 'invoice.paid') t.paid += d.amount ?? 0;
  t.events++;
  t.version = e.version;
  totals.set(e.stream, t);
}
