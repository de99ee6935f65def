import type { RecordedEvent } from './event.js';

/** One page of a paged read: its events, and where the next page starts (null: the read is done). */
export interface Page {
  events: readonly RecordedEvent[];
  next: number | null;
}

/**
 * The events of a read, fetched page by page so a large result is never held whole:
 * `fetchPage(from, size)` returns up to `size` events from cursor `from` and the next page's cursor.
 * The read ends after `limit` events (all when undefined), on a page without a next cursor, or on an
 * empty page.
 */
export async function* readPages(
  from: number,
  limit: number | undefined,
  pageSize: number,
  fetchPage: (from: number, size: number) => Page | Promise<Page>,
): AsyncGenerator<RecordedEvent> {
  let remaining = limit ?? Number.POSITIVE_INFINITY;
  let cursor = from;
  while (remaining > 0) {
    const size = Math.min(pageSize, remaining);
    const page = await fetchPage(cursor, size);
    for (const e of page.events) yield e;
    remaining -= page.events.length;
    if (page.next === null || page.events.length === 0) return;
    cursor = page.next;
  }
}

/**
 * A page read from a table with `LIMIT size`: a short page is the last one, else the next page
 * starts at `nextFrom(last event)`.
 */
export function tablePage(
  events: readonly RecordedEvent[],
  size: number,
  nextFrom: (last: RecordedEvent) => number,
): Page {
  const last = events[events.length - 1];
  return { events, next: last === undefined || events.length < size ? null : nextFrom(last) };
}
