import { checkKnownKeys } from './knownKeys.js';

/** Input limits shared by every store. Each can be changed per store through its options. */
export interface StoreLimits {
  /** Largest event, measured as the UTF-8 bytes of its `data` plus `metadata` JSON. @default 1048576 (1 MiB) */
  maxEventBytes: number;
  /** Most events in one `append` call. @default 5000 */
  maxAppendEvents: number;
}

export const DEFAULT_LIMITS: StoreLimits = { maxEventBytes: 1024 * 1024, maxAppendEvents: 5000 };

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
