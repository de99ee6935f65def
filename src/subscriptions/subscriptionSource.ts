import type { RecordedEvent } from '../core/event.js';
import type { EventStore } from '../core/eventStore.js';
import type { EventFilter } from '../core/filter.js';
import type { UpcastEvents } from '../core/upcasters.js';

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
   * Optional fast path for delivery: up to `limit` events after position `after` that match the
   * normalised `filter`, in position order, read as one page (one query) and returned as one array.
   * With `maxBytes` the page ends early once its events' data and metadata JSON would pass that many
   * UTF-8 bytes (see `countWithinBytes`). Without it the engine collects a page from `readAll`.
   */
  readPage?(after: number, filter: EventFilter, limit: number, maxBytes?: number): Promise<RecordedEvent[]>;
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
}
