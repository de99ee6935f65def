import { randomUUID } from 'node:crypto';
import type { NewEvent } from '../core/event.js';
import type { EventStore } from '../core/eventStore.js';
import { uuidv7 } from '../core/uuid.js';

/** Streams the events are spread over. */
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

/**
 * How the benchmark makes event ids. `'v4'`: random (`randomUUID()`), as a caller with its own random
 * ids would; every insert lands at a random place in the store's unique id index. `'v7'`: UUIDv7,
 * as idem makes them when the caller gives none (and as docs/guarantees.md recommends for ids made by
 * callers): time-ordered, so the index grows at its end.
 */
export type IdKind = 'v4' | 'v7';

export function newId(kind: IdKind): string {
  return kind === 'v7' ? uuidv7() : randomUUID();
}

/** The i-th benchmark event, with a fresh id. */
export function newEvent(i: number, ids: IdKind = 'v4'): NewEvent & { id: string } {
  return {
    id: newId(ids),
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

/**
 * The i-th row. By default row i goes to stream `i mod 1000`; with `perStream` n, rows come in runs of
 * n to one stream (row i to stream `floor(i / n) mod 1000`), as the rows of n-event append calls do.
 */
export function rawRow(i: number, ids: IdKind = 'v4', perStream = 1): RawRow {
  const e = newEvent(i, ids);
  return {
    id: e.id,
    stream: streamOf(Math.floor(i / perStream)),
    type: e.type,
    data: JSON.stringify(e.data),
    metadata: JSON.stringify(e.metadata),
  };
}

/**
 * Fills a store with `total` benchmark events (1,000 per call, a few calls at a time) without holding
 * them all in memory. Setup only: never timed. `ids`: how the event ids are made (random v4 by default).
 */
export async function populate(
  store: Pick<EventStore, 'append'>,
  total: number,
  { perCall = 1000, callers = 4, ids = 'v4' }: { perCall?: number; callers?: number; ids?: IdKind } = {},
): Promise<void> {
  const calls = Math.ceil(total / perCall);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < calls) {
      const c = next++;
      const n = Math.min(perCall, total - c * perCall);
      await store.append(
        streamOf(c),
        Array.from({ length: n }, (_, j) => newEvent(c * perCall + j, ids)),
      );
    }
  };
  await Promise.all(Array.from({ length: callers }, worker));
}
