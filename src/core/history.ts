import type { Page } from './readPages.js';
import type { RecordedEvent } from './event.js';
import { InvalidInputError } from './errors.js';

/** Where a read of history stops: at a global position, or at a commit time. Give one of the two. */
export interface HistoryBoundOptions {
  /** Read only events at or below this global position. */
  toPosition?: number;
  /**
   * Read only events recorded at or before this time: a `Date`, or an ISO-8601 string with a zone
   * (`YYYY-MM-DDTHH:MM:SSZ`, or with an offset such as `+01:00`) or a date alone (`YYYY-MM-DD`,
   * midnight UTC).
   */
  toTime?: Date | string;
}

/** A validated bound: the last position, or the last `recordedAt` (in its stored ISO form). */
export type HistoryBound = { toPosition: number } | { toTime: string };

/** ISO-8601 date, or date and time with seconds and fraction optional and a zone required. */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

/** `value` as the `recordedAt` form (`toISOString`), or `InvalidInputError` naming `field`. */
export function parseHistoryTime(value: unknown, field = 'toTime'): string {
  let ms = Number.NaN;
  if (value instanceof Date) ms = value.getTime();
  else if (typeof value === 'string' && ISO_TIME.test(value)) ms = Date.parse(value);
  if (Number.isNaN(ms)) {
    throw new InvalidInputError(
      field,
      'must be an ISO-8601 time with a zone (2026-03-01T12:00:00Z) or a date (2026-03-01)',
    );
  }
  return new Date(ms).toISOString();
}

/**
 * The bound of a read, or `null` for none. Giving both is refused: a position and a time name the same
 * kind of cut, and a caller holding both means one of them.
 */
export function parseHistoryBound(options: HistoryBoundOptions): HistoryBound | null {
  const { toPosition, toTime } = options;
  if (toPosition === undefined && toTime === undefined) return null;
  if (toPosition !== undefined && toTime !== undefined) {
    throw new InvalidInputError('toTime', 'give toPosition or toTime, not both');
  }
  if (toTime !== undefined) return { toTime: parseHistoryTime(toTime) };
  if (typeof toPosition !== 'number' || !Number.isSafeInteger(toPosition) || toPosition < 0) {
    throw new InvalidInputError('toPosition', 'must be an integer >= 0');
  }
  return { toPosition };
}

/**
 * True once `event` lies past the bound. A stream's history as of a bound is the prefix of its
 * versions before the first event past it, so a reader stops there: with commit clocks of several
 * processes a little apart, a later version could carry an earlier `recordedAt`, and skipping over
 * the event in between would fold a history with a hole. Every store writes `recordedAt` in the
 * `toISOString` form, so comparing the strings compares the times.
 */
export function isPastBound(bound: HistoryBound, event: RecordedEvent): boolean {
  return 'toPosition' in bound ? event.position > bound.toPosition : event.recordedAt > bound.toTime;
}

/** A page of a history read cut at the bound: the events past it are dropped and the read ends there. */
export function boundedPage(page: Page, bound: HistoryBound | null): Page {
  if (bound === null) return page;
  const cut = page.events.findIndex((e) => isPastBound(bound, e));
  return cut < 0 ? page : { events: page.events.slice(0, cut), next: null };
}
