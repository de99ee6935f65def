import {
  type AppendOptions,
  type EventStore,
  type ReadAllOptions,
  type ReadStreamOptions,
} from '../core/eventStore.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';
import type { AppendResult, NewEvent, RecordedEvent } from '../core/event.js';
import { ClosedError } from '../core/errors.js';
import { appendExpectation, satisfies } from '../core/expectedVersion.js';
import { WrongExpectedVersionError } from '../core/errors.js';
import { matchesFilter, type EventFilter } from '../core/filter.js';
import { resolveIdempotentAppend, type ExistingEvent } from '../core/idempotency.js';
import { CHECKS_APPENDS_FIRST, resolveStoreLimits, type StoreLimits } from '../core/limits.js';
import type { MigrationStatus } from '../core/migrationStatus.js';
import { isPastBound } from '../core/history.js';
import { checkAllRead, checkStreamRead } from '../core/readOptions.js';
import { compileUpcasters, type UpcastEvents, type Upcasters } from '../core/upcasters.js';
import type { ConsumerAdmin, DeadLetterAdmin, SubscribeOptions, Subscription } from '../core/subscription.js';
import { prepareAppend, validateStreamName } from '../core/validation.js';
import { AppendListeners } from '../core/appendListeners.js';
import { SubscriptionService } from '../subscriptions/subscriptionService.js';
import {
  scanEnd,
  scannedPage,
  type KeyGroup,
  type KeyPage,
  type MatchCount,
  type ScannedPage,
} from '../subscriptions/subscriptionSource.js';
import { streamHash } from '../core/streamHash.js';
import { MemorySubscriptionState } from './subscriptionState.js';
import { eventCount, traceAppend } from '../core/tracing.js';

export interface MemoryStoreOptions {
  /** Input limits; unset fields keep their defaults. */
  limits?: Partial<StoreLimits>;
  /** Applied to every event read (streams, `readAll`, subscriptions); see `Upcasters`. */
  upcasters?: Upcasters;
}

const MEMORY_STORE_OPTION_KEYS = {
  limits: true,
  upcasters: true,
} as const satisfies KnownKeys<MemoryStoreOptions>;

interface Stored {
  event: RecordedEvent;
  readonly contentKey: string;
}

/**
 * The in-memory reference store: the model the other stores are compared against in tests, and a
 * store for unit tests and demos. Nothing survives the process. Reads hand out copies, so callers
 * cannot change what was stored.
 */
export class MemoryEventStore implements EventStore {
  readonly limits: StoreLimits;
  private readonly log: Stored[] = [];
  private readonly byId = new Map<string, Stored>();
  private readonly streams = new Map<string, Stored[]>();
  private readonly listeners = new AppendListeners();
  private closed = false;
  /** Set only when upcasters are given, so that a read without them does nothing more per event. */
  readonly upcast: UpcastEvents | null;

  private readonly subscriptions = new SubscriptionService(this, new MemorySubscriptionState());
  readonly consumers: ConsumerAdmin = this.subscriptions.consumers;
  readonly deadLetters: DeadLetterAdmin = this.subscriptions.deadLetters;

  /** Internal: appends are checked against `limits` before anything else (see `CHECKS_APPENDS_FIRST`). */
  get [CHECKS_APPENDS_FIRST](): StoreLimits | null {
    return this.limits;
  }

  constructor(options: MemoryStoreOptions = {}) {
    checkKnownKeys(options, MEMORY_STORE_OPTION_KEYS, '');
    this.limits = resolveStoreLimits(options.limits);
    this.upcast = compileUpcasters(options.upcasters);
  }

  async append(stream: string, events: NewEvent[], options: AppendOptions = {}): Promise<AppendResult> {
    return traceAppend(stream, eventCount(events), async () => this.appendNow(stream, events, options));
  }

  private appendNow(stream: string, events: NewEvent[], options: AppendOptions): AppendResult {
    this.assertOpen();
    const prepared = prepareAppend(stream, events, this.limits);
    const expected = appendExpectation(options);
    const existing = new Map<string, ExistingEvent>();
    for (const e of prepared) {
      const old = this.byId.get(e.id);
      if (old) existing.set(e.id, { ...old.event, contentKey: old.contentKey });
    }
    const duplicate = resolveIdempotentAppend(stream, prepared, existing);
    if (duplicate) return duplicate;
    const history = this.streams.get(stream) ?? [];
    if (!satisfies(expected, history.length))
      throw new WrongExpectedVersionError(stream, expected, history.length);
    const recordedAt = new Date().toISOString();
    const firstPosition = this.log.length + 1;
    prepared.forEach((e, i) => {
      const stored: Stored = {
        get contentKey() {
          return e.contentKey;
        },
        event: {
          id: e.id,
          stream,
          type: e.type,
          version: history.length + 1,
          position: firstPosition + i,
          // Stored as its JSON round trip, as the SQL stores do (so -0 reads back as 0).
          data: JSON.parse(e.dataJson) as RecordedEvent['data'],
          metadata: JSON.parse(e.metadataJson) as RecordedEvent['metadata'],
          recordedAt,
        },
      };
      history.push(stored);
      this.log.push(stored);
      this.byId.set(e.id, stored);
    });
    this.streams.set(stream, history);
    const head = this.log.length;
    queueMicrotask(() => this.listeners.emit(head));
    return {
      stream,
      version: history.length,
      firstPosition,
      lastPosition: head,
      duplicate: false,
      ids: prepared.map((e) => e.id),
    };
  }

  async *readStream(stream: string, options: ReadStreamOptions = {}): AsyncGenerator<RecordedEvent> {
    const { from, limit, bound } = checkStreamRead(stream, options);
    const history = this.streams.get(stream) ?? [];
    let yielded = 0;
    for (let i = Math.max(0, from - 1); i < history.length; i++) {
      if (limit !== undefined && yielded >= limit) return;
      this.assertOpen();
      const e = history[i]!.event;
      if (bound !== null && isPastBound(bound, e)) return;
      yielded++;
      yield this.copy(e);
    }
  }

  async *readAll(options: ReadAllOptions = {}): AsyncGenerator<RecordedEvent> {
    const { after, filter, limit } = checkAllRead(options);
    let yielded = 0;
    for (let i = after; i < this.log.length; i++) {
      if (limit !== undefined && yielded >= limit) return;
      this.assertOpen();
      const e = this.log[i]!.event;
      if (!matchesFilter(filter, e)) continue;
      yielded++;
      yield this.copy(e);
    }
  }

  /** The memory store has no schema to migrate. */
  migrationStatus(): Promise<MigrationStatus> {
    return Promise.resolve({ current: 0, expected: 0 });
  }

  /** A stored event as a reader gets it: a copy the reader may change, upcast when upcasters are set. */
  private copy(e: RecordedEvent): RecordedEvent {
    const out = structuredClone(e);
    return this.upcast === null ? out : this.upcast([out])[0]!;
  }

  /**
   * Internal (the subscription engine's read): up to `limit` matching events among the positions
   * after `after`, looking at no more than `maxScan` of them, with the head.
   */
  scanPage(
    after: number,
    filter: EventFilter,
    limit: number,
    maxScan: number,
    maxBytes?: number,
  ): Promise<ScannedPage> {
    if (this.closed) return Promise.reject(new ClosedError('memory store'));
    const head = this.log.length;
    const upTo = scanEnd(after, head, maxScan);
    const events: RecordedEvent[] = [];
    let bytes = 0;
    for (let i = after; i < upTo && events.length < limit; i++) {
      const e = this.log[i]!.event;
      if (!matchesFilter(filter, e)) continue;
      if (maxBytes !== undefined) {
        bytes += Buffer.byteLength(JSON.stringify(e.data)) + Buffer.byteLength(JSON.stringify(e.metadata));
        // The first event always goes in; a later one that would pass the bound ends the page.
        if (events.length > 0 && bytes > maxBytes)
          return Promise.resolve(scannedPage(events, limit, upTo, head, true));
      }
      events.push(this.copy(e));
    }
    return Promise.resolve(scannedPage(events, limit, upTo, head));
  }

  /** Internal (shared tail reads and lag): what a filter looks at of the events after `after`, at most `maxScan`. */
  scanKeys(after: number, maxScan: number): Promise<KeyPage> {
    if (this.closed) return Promise.reject(new ClosedError('memory store'));
    const head = this.log.length;
    const through = scanEnd(after, head, maxScan);
    const page: KeyPage = { positions: [], streams: [], types: [], hashes: [], through, head };
    for (const { event: e } of this.log.slice(after, through)) {
      page.positions.push(e.position);
      page.streams.push(e.stream);
      page.types.push(e.type);
      page.hashes.push(streamHash(e.stream));
    }
    return Promise.resolve(page);
  }

  /** Internal (lag): the distinct stream and type pairs at positions in (`after`, `upTo`], with first and last positions. */
  groupKeys(after: number, upTo: number): Promise<KeyGroup[]> {
    if (this.closed) return Promise.reject(new ClosedError('memory store'));
    const groups = new Map<string, KeyGroup>();
    for (const { event: e } of this.log.slice(after, upTo)) {
      const key = JSON.stringify([e.stream, e.type]);
      const g = groups.get(key);
      if (g) g[4] = e.position;
      else groups.set(key, [e.stream, e.type, streamHash(e.stream), e.position, e.position]);
    }
    return Promise.resolve([...groups.values()]);
  }

  /** Internal (lag): the events at positions in (`after`, `upTo`] that match `filter`. */
  countMatching(after: number, upTo: number, filter: EventFilter): Promise<MatchCount> {
    let count = 0;
    let oldest: string | null = null;
    for (let i = after; i < Math.min(upTo, this.log.length); i++) {
      const e = this.log[i]!.event;
      if (!matchesFilter(filter, e)) continue;
      oldest ??= e.recordedAt;
      count++;
    }
    return Promise.resolve({ count, oldest });
  }

  headPosition(): Promise<number> {
    return Promise.resolve(this.log.length);
  }

  streamVersion(stream: string): Promise<number> {
    return Promise.resolve(this.streams.get(validateStreamName(stream))?.length ?? 0);
  }

  subscribe(consumer: string, options?: SubscribeOptions): Promise<Subscription> {
    return this.subscriptions.subscribe(consumer, options);
  }

  /** Calls `listener(head)` after every append committed through this store object. Returns an unsubscribe. */
  onAppend(listener: (head: number) => void): () => void {
    return this.listeners.add(listener);
  }

  async close(): Promise<void> {
    await this.subscriptions.close();
    this.closed = true;
    this.listeners.clear();
  }

  private assertOpen(): void {
    if (this.closed) throw new ClosedError('memory store');
  }
}

export function createMemoryStore(options: MemoryStoreOptions = {}): MemoryEventStore {
  return new MemoryEventStore(options);
}
