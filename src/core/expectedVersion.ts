import { InvalidInputError, WrongExpectedVersionError } from './errors.js';
import { APPEND_OPTION_KEYS, type AppendOptions } from './eventStore.js';
import { checkKnownKeys } from './knownKeys.js';

/**
 * What the caller believes about the stream before an append:
 * - `'any'`: no check (the default);
 * - `'no_stream'`: the stream must not exist (same as `0`);
 * - `'stream_exists'`: the stream must have at least one event;
 * - a number `n >= 0`: the stream must be exactly at version `n` (`0` = empty).
 */
export type ExpectedVersion = 'any' | 'no_stream' | 'stream_exists' | number;

export function parseExpectedVersion(value: unknown, field = 'expectedVersion'): ExpectedVersion {
  if (value === undefined) return 'any';
  if (value === 'any' || value === 'no_stream' || value === 'stream_exists') return value;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
  if (typeof value === 'string' && /^\d+$/.test(value) && Number.isSafeInteger(Number(value)))
    return Number(value);
  throw new InvalidInputError(field, `must be 'any', 'no_stream', 'stream_exists' or an integer >= 0`);
}

/** The expected version an `append` call's options ask for; unknown keys are refused. */
export function appendExpectation(options: AppendOptions | undefined): ExpectedVersion {
  checkKnownKeys(options, APPEND_OPTION_KEYS, 'options');
  return parseExpectedVersion(options?.expectedVersion, 'expectedVersion');
}

/** Throws `WrongExpectedVersionError` when a stream at `actual` does not satisfy `expected`. */
export function checkExpectedVersion(stream: string, expected: ExpectedVersion, actual: number): void {
  if (!satisfies(expected, actual)) throw new WrongExpectedVersionError(stream, expected, actual);
}

export function satisfies(expected: ExpectedVersion, actual: number): boolean {
  switch (expected) {
    case 'any':
      return true;
    case 'no_stream':
      return actual === 0;
    case 'stream_exists':
      return actual > 0;
    default:
      return actual === expected;
  }
}
