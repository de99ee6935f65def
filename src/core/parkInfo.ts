import { InvalidInputError } from './errors.js';
import { checkKnownKeys } from './knownKeys.js';
import { REDRIVE_BOUNDS } from './limits.js';
import {
  FAILURE_INFO_KEYS,
  PARK_INFO_KEYS,
  REDRIVE_POLICY_KEYS,
  type FailureInfo,
  type ParkInfo,
  type RedrivePolicy,
} from './subscription.js';
import { boundedInt } from './validation.js';

type ErrorInfo = NonNullable<ParkInfo['error']>;

const MAX_TEXT = 64 * 1024;

function text(value: unknown, field: string, required: boolean): string | undefined {
  if (value === undefined && !required) return undefined;
  if (typeof value !== 'string') throw new InvalidInputError(field, 'must be a string');
  if (required && value.length === 0) throw new InvalidInputError(field, 'must not be empty');
  // Long stacks are cut rather than refused: the park must not fail because the error was verbose.
  return value.length > MAX_TEXT ? value.slice(0, MAX_TEXT) : value;
}

function errorInfo(value: unknown, field: string): ErrorInfo {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidInputError(field, 'must be an object with a message');
  }
  const e = value as Record<string, unknown>;
  const out: ErrorInfo = { message: text(e.message, `${field}.message`, true)! };
  const name = text(e.name, `${field}.name`, false);
  const stack = text(e.stack, `${field}.stack`, false);
  if (name !== undefined) out.name = name;
  // An error object's code may be anything (a number, from some libraries): only a string one is kept.
  if (typeof e.code === 'string' && e.code.length > 0) out.code = e.code.slice(0, 200);
  if (stack !== undefined) out.stack = stack;
  return out;
}

/** Checks `park` input; `error` keeps only name, a string code, message and stack (an `Error` object works). */
export function validateParkInfo(info: unknown): ParkInfo {
  if (info === null || typeof info !== 'object') throw new InvalidInputError('info', 'must be an object');
  checkKnownKeys(info, PARK_INFO_KEYS, 'info');
  const i = info as Record<string, unknown>;
  const out: ParkInfo = { reason: text(i.reason, 'info.reason', true)! };
  if (i.error !== undefined) out.error = errorInfo(i.error, 'info.error');
  if (i.attempts !== undefined) {
    if (typeof i.attempts !== 'number' || !Number.isSafeInteger(i.attempts) || i.attempts < 1) {
      throw new InvalidInputError('info.attempts', 'must be an integer >= 1');
    }
    out.attempts = i.attempts;
  }
  if (i.redrive !== undefined) out.redrive = validateRedrivePolicy(i.redrive, 'info.redrive');
  return out;
}

/** Checks a redrive policy against `REDRIVE_BOUNDS`. */
export function validateRedrivePolicy(value: unknown, field: string): RedrivePolicy {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new InvalidInputError(field, 'must be an object { afterMs, factor, max }');
  checkKnownKeys(value, REDRIVE_POLICY_KEYS, field);
  const r = value as Record<string, unknown>;
  const { afterMs, factor, max } = REDRIVE_BOUNDS;
  if (
    typeof r.factor !== 'number' ||
    !Number.isFinite(r.factor) ||
    r.factor < factor.min ||
    r.factor > factor.max
  )
    throw new InvalidInputError(`${field}.factor`, `must be a number from ${factor.min} to ${factor.max}`);
  return {
    afterMs: boundedInt(r.afterMs ?? null, `${field}.afterMs`, afterMs.min, afterMs.max, 0),
    factor: r.factor,
    max: boundedInt(r.max ?? null, `${field}.max`, max.min, max.max, 0),
  };
}

/** When the redrive after `redrives` earlier ones is due, in ms from now (never beyond the bound). */
export function redriveDelayMs(policy: RedrivePolicy, redrives: number): number {
  return Math.min(REDRIVE_BOUNDS.afterMs.max, policy.afterMs * policy.factor ** redrives);
}

/** Checks `fail` input. */
export function validateFailureInfo(info: unknown): FailureInfo {
  if (info === null || typeof info !== 'object') throw new InvalidInputError('info', 'must be an object');
  checkKnownKeys(info, FAILURE_INFO_KEYS, 'info');
  const i = info as Record<string, unknown>;
  const out: FailureInfo = { error: errorInfo(i.error, 'info.error') };
  if (i.event !== undefined) {
    const e = i.event as Record<string, unknown> | null;
    if (e === null || typeof e !== 'object') throw new InvalidInputError('info.event', 'must be an object');
    const { id, stream, version, position, type } = e;
    if (typeof id !== 'string' || typeof stream !== 'string' || typeof type !== 'string') {
      throw new InvalidInputError('info.event', 'must carry id, stream and type strings');
    }
    if (typeof version !== 'number' || typeof position !== 'number') {
      throw new InvalidInputError('info.event', 'must carry numeric version and position');
    }
    out.event = { id, stream, version, position, type };
  }
  return out;
}
