import type { RecordedEvent } from '../core/event.js';
import type { EventStore } from '../core/eventStore.js';
import type { EventFilter } from '../core/filter.js';
import type { UpcastEvents } from '../core/upcasters.js';

/** A page of the log as a subscription reads it: the matching events and how far the read looked. */
export interface ScannedPage {
  /** The events that match, in position order. */
  events: RecordedEvent[];
  /**
   * Every position up to this one was read: the last event's when the page is full, else as far as
   * the read looked (the head it saw, or the end of the positions it was allowed to look at).
   */
  through: number;
  /** The head the read saw (all positions up to it committed): `through < head` means the log goes on. */
  head: number;
}

/**
 * What the subscription engine needs from a store: its reads, and optionally an in-process hook fired
 * after each commit (live wake-ups without waiting for the polling interval). Appends by other
 * processes (a shared SQLite file, a shared PostgreSQL database) are found by polling.
 */
export interface SubscriptionSource {
  readAll: EventStore['readAll'];
  headPosition: EventStore['headPosition'];
  onAppend?(listener: (head: number) => void): () => void;
  /**
   * Whether `onAppend` must hear other processes' commits (PostgreSQL: LISTEN). The service turns it
   * off while no subscription waits for appends (idle ones rest until the next polling tick).
   */
  hearOthers?(on: boolean): void;
  /**
   * Optional fast path for delivery: up to `limit` events after position `after` that match the
   * normalised `filter`, in position order, read as one page (one query) and returned as one array.
   * With `maxBytes` the page ends early once its events' data and metadata JSON would pass that many
   * UTF-8 bytes (see `countWithinBytes`). Without it the engine collects a page from `readAll`.
   */
  readPage?(after: number, filter: EventFilter, limit: number, maxBytes?: number): Promise<RecordedEvent[]>;
  /**
   * Optional, preferred over `readPage`: up to `limit` events that match `filter` among the positions
   * after `after`, looking at no more than `maxScan` positions, with the head the same read saw (one
   * query). A filter that matches nothing then costs one bounded read per page, and the read position
   * moves past what was looked at. Without it the engine reads the head, then a page. With
   * `maxBytes`, the page ends before the event that would take its events' data and metadata JSON
   * past that many bytes (at least one event), and then counts as full.
   */
  scanPage?(
    after: number,
    filter: EventFilter,
    limit: number,
    maxScan: number,
    maxBytes?: number,
  ): Promise<ScannedPage>;
  /**
   * True when a read waits on I/O (a network round trip): the engine then reads the next page while
   * the consumer processes the current one. Not worth it for a synchronous embedded read.
   */
  readonly readAhead?: boolean;
  /**
   * The store's upcasters. Its reads already apply them; the engine applies them to dead letters
   * delivered again, which are kept as they were first delivered.
   */
  readonly upcast?: UpcastEvents | null;

  /**
   * Optional fast path for lag: how many events at positions in (`after`, `upTo`] match `filter`, and
   * the earliest `recordedAt` among them, counted in one query without reading the events out.
   */
  countMatching?(after: number, upTo: number, filter: EventFilter): Promise<MatchCount>;

  /**
   * Optional: what a filter looks at of every event among the positions after `after`, looking at no
   * more than `maxScan` positions, with the head the same read saw (one query, without the events'
   * JSON). With it, idle subscriptions share one read of the log's tail (filters matched in the
   * engine, as `matchesFilter`).
   */
  scanKeys?(after: number, maxScan: number): Promise<KeyPage>;

  /**
   * Optional: whether any stored event's stream is in one of the filter's categories or starts with
   * one of its stream prefixes (true for a filter with neither), by one index probe each, and when
   * none is, the head up to which that holds. Then no event up to that head matches the filter, and
   * the shared tail answers its looks without reading keys: an idle subscription whose streams do
   * not exist costs probes, not a share of the reads of everything appended. It needs an index that
   * keeps the streams sharing a prefix next to each other (code-point order: SQLite's; PostgreSQL's
   * under a collation that sorts so); where the store's does not, it answers `may: true` (it cannot
   * tell) without asking the database.
   */
  streamsMayMatch?(filter: EventFilter): Promise<StreamsAnswer>;

  /**
   * Optional: the head, then the first position after `after` (up to that head) whose stream is in one
   * of `categories` or starts with one of `prefixes`, or null when none is (one query). With it, the
   * shared tail asks once per polling tick whether any of its resting subscriptions' streams was
   * appended to, and reads no keys when none was.
   */
  firstStreamMatch?(
    after: number,
    prefixes: readonly string[],
    categories: readonly string[],
  ): Promise<{ head: number; first: number | null }>;

  /**
   * Optional: the distinct stream and type pairs of the events at positions in (`after`, `upTo`],
   * each with the stream's hash and its first and last position there (one query). With it, the lag
   * of consumers near each other whose filters match none of them needs no count of its own.
   */
  groupKeys?(after: number, upTo: number): Promise<KeyGroup[]>;
}

/** One pair of `groupKeys`. */
export type KeyGroup = [stream: string, type: string, streamHash: number, first: number, last: number];

/**
 * What a filter looks at of a run of events, in position order, as parallel arrays (entry `i` of each
 * is the `i`-th event's): no object per event, so a read of thousands of keys a second for idle
 * subscriptions leaves little to collect.
 */
export interface EventKeys {
  positions: number[];
  streams: string[];
  types: string[];
  /** Each stream's `streamHash`. */
  hashes: number[];
}

/** What `scanKeys` answers: every event at positions in (`after`, `through`], in position order. */
export interface KeyPage extends EventKeys {
  /** As far as the read looked: the head it saw, or the end of the positions it was allowed to look at. */
  through: number;
  /** The head the read saw (all positions up to it committed). */
  head: number;
}

/** The index of the first of `positions` (ascending) after `position`. */
export function firstKeyAfter(positions: readonly number[], position: number): number {
  let lo = 0;
  let hi = positions.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (positions[mid]! <= position) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** What `countMatching` answers. */
export interface MatchCount {
  count: number;
  /** The earliest `recordedAt` of the matching events; null when none matches. */
  oldest: string | null;
}

/** The last position a scan of at most `maxScan` positions after `after` may look at, given the head. */
export function scanEnd(after: number, head: number, maxScan: number): number {
  return Math.max(after, Math.min(head, after + maxScan));
}

/**
 * The page a read up to `end` returned (see `scanEnd`; a read without an end may go past it): a full
 * page was read up to its last event only; an unfilled one looked at every position up to `end` and
 * up to its last event.
 */
export function scannedPage(
  events: RecordedEvent[],
  limit: number,
  end: number,
  head: number,
  cut = false,
): ScannedPage {
  const last = events.length > 0 ? events[events.length - 1]!.position : end;
  // A page cut at the byte bound (`cut`) was read up to its last event only, like a full one.
  const through = events.length >= limit || cut ? last : Math.max(end, last);
  return { events, through, head: Math.max(head, through) };
}

/**
 * What `streamsMayMatch` answers: no stored stream is one the filter wants, up to `head`; or one may
 * be (one is, or the store cannot tell).
 */
export type StreamsAnswer = { may: false; head: number } | { may: true };
