import type { ConsumerTarget, TargetTransaction } from '../../../src/core/consumerTarget.js';
import type { RecordedEvent } from '../../../src/core/event.js';
import type { EventStore } from '../../../src/core/eventStore.js';
import type {
  FailureInfo,
  ParkInfo,
  ParkResult,
  SubscribeOptions,
  Subscription,
  SubscriptionMessage,
} from '../../../src/core/subscription.js';

/** Faults a wrapped source injects; counters are decremented as they fire. */
export interface SourceFaults {
  /** Events the transport "loses": the store delivered them, the consumer never sees them. */
  hide?: (event: RecordedEvent) => boolean;
  /** The next `failAcks` acks fail before reaching the store (a crash after commit, before ack). */
  failAcks?: number;
  /** The iteration throws a connection error instead of delivering the event message number `breakAt` (1-based), once. */
  breakAt?: number;
  /** Counts what happened. */
  seen?: { subscribes: number; acks: number; messages: number };
  /** The `recordedAt` the consumer sees for each delivered event (an event recorded long ago). */
  recordedAt?: (event: RecordedEvent) => string;
}

class FaultySubscription implements Subscription {
  constructor(
    private readonly inner: Subscription,
    private readonly f: SourceFaults,
  ) {}
  get consumer(): string {
    return this.inner.consumer;
  }
  get epoch(): number {
    return this.inner.epoch;
  }
  get startPosition(): number {
    return this.inner.startPosition;
  }
  async *[Symbol.asyncIterator](): AsyncGenerator<SubscriptionMessage> {
    for await (const m of this.inner) {
      if (m.kind !== 'events') {
        yield m;
        continue;
      }
      if (this.f.seen) this.f.seen.messages++;
      if (this.f.breakAt !== undefined && --this.f.breakAt <= 0) {
        delete this.f.breakAt;
        throw new Error('connection reset by peer (injected)');
      }
      const hide = this.f.hide;
      const shown = hide ? m.events.filter((e) => !hide(e)) : m.events;
      const at = this.f.recordedAt;
      const events = at ? shown.map((e) => ({ ...e, recordedAt: at(e) })) : shown;
      if (events.length > 0) yield { ...m, events };
    }
  }
  ack(position: number): Promise<void> {
    if (this.f.seen) this.f.seen.acks++;
    if (this.f.failAcks !== undefined && this.f.failAcks > 0) {
      this.f.failAcks--;
      return Promise.reject(new Error('connection lost before the ack reached the store (injected)'));
    }
    return this.inner.ack(position);
  }
  park(position: number, info: ParkInfo): Promise<ParkResult> {
    return this.inner.park(position, info);
  }
  outage(active: boolean): Promise<void> {
    return this.inner.outage(active);
  }

  fail(info: FailureInfo): Promise<void> {
    return this.inner.fail(info);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

/** The store with `subscribe` wrapped to inject `faults`; everything else is the store itself. */
export function faultySource(store: EventStore, faults: SourceFaults): EventStore {
  return {
    append: (s, e, o) => store.append(s, e, o),
    readStream: (s, o) => store.readStream(s, o),
    readAll: (o) => store.readAll(o),
    headPosition: () => store.headPosition(),
    streamVersion: (s) => store.streamVersion(s),
    subscribe: async (consumer: string, options?: SubscribeOptions) => {
      if (faults.seen) faults.seen.subscribes++;
      return new FaultySubscription(await store.subscribe(consumer, options), faults);
    },
    consumers: store.consumers,
    deadLetters: store.deadLetters,
    close: () => store.close(),
  };
}

/** Faults a wrapped target injects. */
export interface TargetFaults {
  /** The next `failRecords` batches fail while writing ledger and checkpoint (a crash before commit). */
  failRecords?: number;
  /** Every batch that would record more than this many ledger rows fails (a target that cuts long transactions). */
  failRecordsOver?: number;
  /** Counts lookups (calls) and the ledger keys asked about, to show which events skip the ledger. */
  lookups?: { keys: number; versions: number; keysAsked?: string[] };
}

export function faultyTarget<Tx>(target: ConsumerTarget<Tx>, faults: TargetFaults): ConsumerTarget<Tx> {
  const wrap = (t: TargetTransaction<Tx>): TargetTransaction<Tx> => ({
    tx: t.tx,
    checkpoint: (c) => t.checkpoint(c),
    processedKeys: (c, k) => {
      if (faults.lookups) {
        faults.lookups.keys++;
        faults.lookups.keysAsked?.push(...k);
      }
      return t.processedKeys(c, k);
    },
    entityVersions: (c, s) => {
      if (faults.lookups) faults.lookups.versions++;
      return t.entityVersions(c, s);
    },
    savepoint: () => t.savepoint(),
    releaseSavepoint: () => t.releaseSavepoint(),
    rollbackToSavepoint: () => t.rollbackToSavepoint(),
    record: (c, r) => {
      if (faults.failRecords !== undefined && faults.failRecords > 0) {
        faults.failRecords--;
        return Promise.reject(new Error('the process died before the commit (injected)'));
      }
      if (faults.failRecordsOver !== undefined && r.entries.length > faults.failRecordsOver)
        return Promise.reject(new Error('the connection was cut in a long transaction (injected)'));
      return t.record(c, r);
    },
    addOnce: (c, m, a) => t.addOnce(c, m, a),
  });
  return {
    kind: target.kind,
    migrate: () => target.migrate(),
    transaction: (fn) => target.transaction((t) => fn(wrap(t))),
    readCheckpoint: (c) => target.readCheckpoint(c),
    ledgerSize: (c) => target.ledgerSize(c),
    counterValue: (c) => target.counterValue(c),
    close: () => target.close(),
  };
}
