import type { RecordedEvent } from './event.js';
import type { EventStore, ReadAllOptions, ReadStreamOptions, ShredRecord } from './eventStore.js';
import type { SubscribeOptions, Subscription } from './subscription.js';

/**
 * What the consumer runtime reads from: every idem store is one, and so is `jetStreamSource` from
 * `idem/nats`. The runtime subscribes, commits a batch in its target, then acknowledges it through
 * the subscription; nothing else moves the source's cursor.
 *
 * - `subscribe` delivers batches in position order. A batch of events that the source delivers again
 *   and that may sit at or below positions it delivered before (a redelivery) is flagged
 *   `redelivery`: the runtime then asks its ledger about every event instead of skipping those at or
 *   below its target checkpoint.
 * - `readStream` reads an entity's versions to fill a version gap. A source without it cannot fill
 *   gaps: `gaps: 'recover'` then stops at a gap as `gaps: 'fail'` does.
 * - `shreds` lists the streams whose subjects were shredded: the runtime forgets those entities.
 * - `readAll` finds the last matching event up to a head for `whenCaughtUp` under a filter. A source
 *   without it reports `caught_up` markers at or past its head instead.
 */
export interface ConsumerSource {
  subscribe(consumer: string, options?: SubscribeOptions): Promise<Subscription>;
  /** The position of the last event the source holds, 0 when none. */
  headPosition(): Promise<number>;
  readStream?(stream: string, options?: ReadStreamOptions): AsyncIterable<RecordedEvent>;
  readAll?(options?: ReadAllOptions): AsyncIterable<RecordedEvent>;
  /** The store's shred log (see `EventStore.shreds`): the runtime follows it to call `onShred`. */
  shreds?(afterSeq: number, limit?: number): Promise<ShredRecord[]>;
  /** Source-specific gauges and counters shown under `source` in `consumer.metrics()`. */
  metrics?(): SourceMetrics;
}

/** Figures a source reports about its delivery, e.g. JetStream's pending and ack-pending counts. */
export type SourceMetrics = Readonly<Record<string, number>>;

/**
 * The idem store behind a source, or null for a source with no cursor, consumer records or dead
 * letters of idem's (such as `jetStreamSource`).
 */
export function idemStoreOf(source: ConsumerSource): EventStore | null {
  return 'consumers' in source && 'deadLetters' in source ? (source as EventStore) : null;
}
