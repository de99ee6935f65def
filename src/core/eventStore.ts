import type { AppendResult, NewEvent, RecordedEvent } from './event.js';
import type { ExpectedVersion } from './expectedVersion.js';
import type { EventFilter } from './filter.js';
import type { KnownKeys } from './knownKeys.js';
import type { MigrationStatus } from './migrationStatus.js';
import type { HistoryBoundOptions } from './history.js';
import type { ConsumerAdmin, DeadLetterAdmin, SubscribeOptions, Subscription } from './subscription.js';

export interface AppendOptions {
  /** @default 'any' */
  expectedVersion?: ExpectedVersion;
}

export const APPEND_OPTION_KEYS = { expectedVersion: true } as const satisfies KnownKeys<AppendOptions>;

/**
 * `toPosition` or `toTime` (one of them) reads the stream as it was then: its versions up to the last
 * event at or below the position, or recorded at or before the time.
 */
export interface ReadStreamOptions extends HistoryBoundOptions {
  /** First version to read. @default 1 */
  fromVersion?: number;
  /** Most events to yield. @default unlimited */
  limit?: number;
}

export const READ_STREAM_OPTION_KEYS = {
  fromVersion: true,
  limit: true,
  toPosition: true,
  toTime: true,
} as const satisfies KnownKeys<ReadStreamOptions>;

export interface ReadAllOptions {
  /** Yield events with a position strictly greater than this. @default 0 */
  after?: number;
  filter?: EventFilter;
  /** Most events to yield. @default unlimited */
  limit?: number;
}

export const READ_ALL_OPTION_KEYS = {
  after: true,
  filter: true,
  limit: true,
} as const satisfies KnownKeys<ReadAllOptions>;

/** What `shred` did. */
export interface ShredResult {
  subject: string;
  /** False when the subject had no key (never encrypted, or shredded before). */
  shredded: boolean;
}

/** One entry of the shred log: `shred(subject)` found events of `subject` in `stream`. */
export interface ShredRecord {
  /** The log's own sequence number, from 1. */
  seq: number;
  subject: string;
  stream: string;
  /** When the shred ran (ISO 8601). */
  shreddedAt: string;
}

/**
 * The event store port: the same contract for the in-memory, SQLite, PostgreSQL and remote stores.
 * Reads are async iterables that fetch in pages, so a large result is never held in memory whole.
 */
export interface EventStore {
  /** Appends atomically: all events or none. Idempotent by event id (see `AppendResult.duplicate`). */
  append(stream: string, events: NewEvent[], options?: AppendOptions): Promise<AppendResult>;
  /** One stream's events in version order; nothing when the stream does not exist. */
  readStream(stream: string, options?: ReadStreamOptions): AsyncIterable<RecordedEvent>;
  /** Every event in global position order, optionally after a position and filtered. */
  readAll(options?: ReadAllOptions): AsyncIterable<RecordedEvent>;
  /** The position of the last committed event, 0 when empty. */
  headPosition(): Promise<number>;
  /** The stream's current version, 0 when it does not exist. */
  streamVersion(stream: string): Promise<number>;
  /** Opens a durable subscription for a named consumer (see `Subscription`). */
  subscribe(consumer: string, options?: SubscribeOptions): Promise<Subscription>;
  readonly consumers: ConsumerAdmin;
  readonly deadLetters: DeadLetterAdmin;
  /**
   * The store's schema version against the one this code expects, for `/health`. Every built-in store
   * answers it; a store without a schema answers `{ current: 0, expected: 0 }`.
   */
  migrationStatus?(): Promise<MigrationStatus>;
  /**
   * Crypto-shredding: deletes the subject's key (see `encrypt` on the SQLite and PostgreSQL stores),
   * so that its events read back with `data: null` and `metadata.shredded: true`. `shredded` is
   * false when the subject had no key. Absent on stores without a key table.
   */
  shred?(subject: string): Promise<ShredResult>;
  /**
   * The shred log after `afterSeq`, oldest first, at most `limit` (1-1000, default 1000) entries: one
   * per stream in which a `shred` found events of its subject. Consumers follow it to forget those
   * entities (`onShred`). Absent on stores without a key table.
   */
  shreds?(afterSeq: number, limit?: number): Promise<ShredRecord[]>;
  /** Releases leases and closes connections/files. Safe to call twice. */
  close(): Promise<void>;
}
