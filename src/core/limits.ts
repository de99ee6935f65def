import { checkKnownKeys } from './knownKeys.js';

/** Input limits shared by every store. Each can be changed per store through its options. */
export interface StoreLimits {
  /** Largest event, measured as the UTF-8 bytes of its `data` plus `metadata` JSON. @default 1048576 (1 MiB) */
  maxEventBytes: number;
  /** Most events in one `append` call. @default 5000 */
  maxAppendEvents: number;
}

export const DEFAULT_LIMITS: StoreLimits = { maxEventBytes: 1024 * 1024, maxAppendEvents: 5000 };

/**
 * Internal: a store that checks every append against its `StoreLimits` before it does anything else
 * with the events (the built-in stores without `encrypt`, which seals the events first) returns those
 * limits under this key, and null otherwise. A server on such a store, whose own limits are no
 * stricter, leaves the check to the store instead of running it twice per append.
 */
export const CHECKS_APPENDS_FIRST: unique symbol = Symbol.for('idem.checksAppendsFirst');

/** A store that may say how it checks appends (`CHECKS_APPENDS_FIRST`). */
export interface ChecksAppendsFirst {
  readonly [CHECKS_APPENDS_FIRST]?: StoreLimits | null;
}

/** A store's `limits` option checked for unknown keys (the defaults name every one), with the defaults filled in. */
export function resolveStoreLimits(limits: Partial<StoreLimits> | undefined): StoreLimits {
  checkKnownKeys(limits, DEFAULT_LIMITS, 'limits');
  return { ...DEFAULT_LIMITS, ...limits };
}

/** Longest stream name, in characters. */
export const MAX_STREAM_LENGTH = 200;
/** Longest event type, in characters. */
export const MAX_TYPE_LENGTH = 256;
/** Longest consumer name, in characters. Consumer names are `[A-Za-z0-9_.:-]`. */
export const MAX_CONSUMER_NAME_LENGTH = 128;

/** Most appends in one `POST /v1/appends` request (each is decided on its own). */
export const MAX_APPENDS_PER_REQUEST = 1000;

/** Most shred log entries one `shreds` call returns. */
export const MAX_SHREDS_LIMIT = 1000;

/** Most entries in each list of a filter (`types`, `categories`, `streamPrefixes`). */
export const MAX_FILTER_ENTRIES = 256;

/** Shortest lease accepted, in ms: renewal runs every third of it, so shorter would be mostly heartbeats. */
export const MIN_LEASE_TTL_MS = 1_000;
/**
 * Longest lease accepted, in ms. An owner that dies holds its consumer until the lease runs out, and
 * the renewal timer (a third of it) stays far below `setInterval`'s limit.
 */
export const MAX_LEASE_TTL_MS = 300_000;
/** Most events in one delivered batch of a subscription. */
export const MAX_BATCH_SIZE = 5_000;
/** Most delivered-but-unacknowledged events of a subscription. */
export const MAX_IN_FLIGHT = 50_000;
/**
 * A delivered page ends early once its events' `data` and `metadata` JSON reach this many UTF-8
 * bytes (a page always holds at least one event), so one frame or batch stays bounded whatever
 * `batchSize` is.
 */
export const MAX_PAGE_BYTES = 4 * 1024 * 1024;

/** The bounds of a subscription's numeric options: checked alike by the engine and the remote client. */
export const SUBSCRIBE_BOUNDS = {
  maxInFlight: { min: 1, max: MAX_IN_FLIGHT },
  batchSize: { min: 1, max: MAX_BATCH_SIZE },
  leaseTtlMs: { min: MIN_LEASE_TTL_MS, max: MAX_LEASE_TTL_MS },
} as const;

/**
 * The bounds of an automatic redrive (`onError.redrive`, `ParkInfo.redrive`): the first delay, the
 * factor it grows by per redrive, and the most redrives. No delay is ever longer than `afterMs.max`.
 */
export const REDRIVE_BOUNDS = {
  afterMs: { min: 100, max: 30 * 24 * 3600 * 1000 },
  factor: { min: 1, max: 10 },
  max: { min: 1, max: 100 },
} as const;
