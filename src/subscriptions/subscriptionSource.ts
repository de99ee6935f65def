import type { EventStore } from '../core/eventStore.js';

/**
 * What the subscription engine needs from a store: its reads, and optionally an in-process hook fired
 * after each commit (live wake-ups without waiting for the polling interval). Appends by other
 * processes (a shared SQLite file, a shared PostgreSQL database) are found by polling.
 */
export interface SubscriptionSource {
  readAll: EventStore['readAll'];
  headPosition: EventStore['headPosition'];
  onAppend?(listener: (head: number) => void): () => void;
}
