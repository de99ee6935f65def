import { hostname } from 'node:os';
import { InvalidInputError } from '../core/errors.js';
import { normalizeFilter, type EventFilter } from '../core/filter.js';
import { SUBSCRIBE_OPTION_KEYS, type StartFrom, type SubscribeOptions } from '../core/subscription.js';
import { checkKnownKeys } from '../core/knownKeys.js';
import { SUBSCRIBE_BOUNDS } from '../core/limits.js';
import { boundedInt, validateConsumerName, validateLabel } from '../core/validation.js';

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

function bounded(value: unknown, field: keyof typeof SUBSCRIBE_BOUNDS, fallback: number): number {
  const { min, max } = SUBSCRIBE_BOUNDS[field];
  return boundedInt(value, field, min, max, fallback);
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
  if (o.owner !== undefined) validateLabel(o.owner, 'owner');
  return {
    consumer: name,
    filter: normalizeFilter(o.filter),
    from,
    maxInFlight: bounded(o.maxInFlight, 'maxInFlight', DEFAULT_MAX_IN_FLIGHT),
    batchSize: bounded(o.batchSize, 'batchSize', DEFAULT_BATCH_SIZE),
    standby: o.standby ?? false,
    leaseTtlMs: bounded(o.leaseTtlMs, 'leaseTtlMs', DEFAULT_LEASE_TTL_MS),
    owner: o.owner ?? `${hostname()}:${process.pid}`,
    signal: o.signal,
  };
}
