import { randomUUID } from 'node:crypto';
import type { NewEvent } from '../core/event.js';
import type { EventStore } from '../core/eventStore.js';

/** Streams the events are spread over (the 1,000). */
export const STREAMS = 1000;

/** The stream of the i-th event: `invoice-<i mod 1000>`. */
export function streamOf(i: number, streams = STREAMS): string {
  return `invoice-${i % streams}`;
}

const NOTE = 'net 30 days; thank you for your business';

/** About 200 bytes of JSON: an invoice line as a billing system would append it. */
export function payload(i: number): {
  invoiceId: string;
  customer: string;
  amount: number;
  currency: string;
  lines: number;
  note: string;
  issuedAt: string;
} {
  return {
    invoiceId: `inv-${i}`,
    customer: `customer-${(i * 7919) % 50_000}`,
    amount: 100 + (i % 9_900),
    currency: 'EUR',
    lines: 1 + (i % 12),
    note: NOTE,
    issuedAt: '2026-01-01T00:00:00.000Z',
  };
}

/** The i-th benchmark event, with a fresh id. */
export function newEvent(i: number): NewEvent & { id: string } {
  return {
    id: randomUUID(),
    type: i % 4 === 3 ? 'invoice.paid' : 'invoice.issued',
    data: payload(i),
    metadata: { commandId: `cmd-${i}` },
  };
}

/** One row as a raw baseline writes it: the same columns and the same JSON text as the store. */
export interface RawRow {
  id: string;
  stream: string;
  type: string;
  data: string;
  metadata: string;
}

export function rawRow(i: number): RawRow {
  const e = newEvent(i);
  return {
    id: e.id,
    stream: streamOf(i),
    type: e.type,
    data: JSON.stringify(e.data),
    metadata: JSON.stringify(e.metadata),
  };
}

/**
 * Fills a store with `total` benchmark events (1,000 per call, a few calls at a time) without holding
 * them all in memory. Setup only: never timed.
 */
export async function populate(
  store: Pick<EventStore, 'append'>,
  total: number,
  perCall = 1000,
  callers = 4,
): Promise<void> {
  const calls = Math.ceil(total / perCall);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < calls) {
      const c = next++;
      const n = Math.min(perCall, total - c * perCall);
      await store.append(
        streamOf(c),
        Array.from({ length: n }, (_, j) => newEvent(c * perCall + j)),
      );
    }
  };
  await Promise.all(Array.from({ length: callers }, worker));
}
