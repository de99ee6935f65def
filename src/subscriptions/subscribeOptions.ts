import { hostname } from 'node:os';
import { InvalidInputError } from '../core/errors.js';
import { normalizeFilter, type EventFilter } from '../core/filter.js';
import { SUBSCRIBE_OPTION_KEYS, type StartFrom, type SubscribeOptions } from '../core/subscription.js';
import { checkKnownKeys } from '../core/knownKeys.js';
import { validateConsumerName } from '../core/validation.js';

/** `SubscribeOptions` checked and with every default filled in. */
export interface ResolvedSubscribeOptions {
  consumer: string;
  filter: EventFilter;
  from: StartFrom;
  maxInFlight: number;
  batchSize: number;
  standby: boolean;
  leaseTtlMs: number;
  owner: string;
  signal: AbortSignal | undefined;
}

export const DEFAULT_MAX_IN_FLIGHT = 1000;
export const DEFAULT_BATCH_SIZE = 500;
export const DEFAULT_LEASE_TTL_MS = 10_000;
/** Shortest lease accepted: renewal runs every third of it, so shorter would be mostly heartbeats. */
export const MIN_LEASE_TTL_MS = 300;

function positiveInt(value: unknown, field: string, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw new InvalidInputError(field, `must be an integer >= ${min}`);
  }
  return value;
}

/** Validates `subscribe` input; throws `InvalidInputError` naming the field and rule. */
export function resolveSubscribeOptions(
  consumer: unknown,
  options: SubscribeOptions | undefined,
): ResolvedSubscribeOptions {
  const name = validateConsumerName(consumer);
  checkKnownKeys(options, SUBSCRIBE_OPTION_KEYS, 'options');
  const o = options ?? {};
  const from = o.from ?? 'start';
  if (
    from !== 'start' &&
    from !== 'end' &&
    !(typeof from === 'number' && Number.isSafeInteger(from) && from >= 0)
  ) {
    throw new InvalidInputError('from', "must be 'start', 'end' or a position (integer >= 0)");
  }
  if (o.standby !== undefined && typeof o.standby !== 'boolean')
    throw new InvalidInputError('standby', 'must be a boolean');
  if (
    o.owner !== undefined &&
    (typeof o.owner !== 'string' || o.owner.length === 0 || o.owner.length > 200)
  ) {
    throw new InvalidInputError('owner', 'must be a string of 1-200 characters');
  }
  return {
    consumer: name,
    filter: normalizeFilter(o.filter),
    from,
    maxInFlight: positiveInt(o.maxInFlight, 'maxInFlight', DEFAULT_MAX_IN_FLIGHT),
    batchSize: positiveInt(o.batchSize, 'batchSize', DEFAULT_BATCH_SIZE),
    standby: o.standby ?? false,
    leaseTtlMs: positiveInt(o.leaseTtlMs, 'leaseTtlMs', DEFAULT_LEASE_TTL_MS, MIN_LEASE_TTL_MS),
    owner: o.owner ?? `${hostname()}:${process.pid}`,
    signal: o.signal,
  };
}
