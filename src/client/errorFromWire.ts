/** Rebuilds the error classes from the server's `{ code, message, details }`, so `instanceof` works as with an embedded store. */
import {
  ClosedError,
  ConsumerBusyError,
  ConsumerIdentityConflictError,
  FencedError,
  IdempotencyConflictError,
  IdemError,
  InvalidInputError,
  NotFoundError,
  StorageFullError,
  TooLargeError,
  WrongExpectedVersionError,
  type ErrorCode,
} from '../core/errors.js';

type Details = Record<string, unknown>;

const str = (v: unknown): string => (typeof v === 'string' ? v : String(v));
const num = (v: unknown): number => (typeof v === 'number' ? v : Number(v));
const strOrNull = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const numOrNull = (v: unknown): number | null => (typeof v === 'number' ? v : null);

function build(code: ErrorCode, message: string, d: Details): IdemError {
  switch (code) {
    case 'wrong_expected_version':
      if ('stream' in d && 'actual' in d)
        return new WrongExpectedVersionError(str(d.stream), d.expected as string | number, num(d.actual));
      break;
    case 'idempotency_conflict':
      return new IdempotencyConflictError(message, d as { id: string; stream: string });
    case 'invalid_input':
      if (typeof d.field === 'string' && typeof d.rule === 'string')
        return new InvalidInputError(d.field, d.rule);
      break;
    case 'too_large':
      if ('field' in d) return new TooLargeError(str(d.field), num(d.size), num(d.limit));
      break;
    case 'not_found':
      if ('what' in d && 'name' in d) return new NotFoundError(str(d.what), str(d.name));
      break;
    case 'consumer_busy':
      return new ConsumerBusyError(str(d.consumer), strOrNull(d.owner), strOrNull(d.leaseExpiresAt));
    case 'consumer_identity_conflict':
      return new ConsumerIdentityConflictError(str(d.consumer), d.existingFilter, d.requestedFilter);
    case 'fenced':
      return new FencedError(str(d.consumer), num(d.epoch), numOrNull(d.currentEpoch));
    case 'storage_full':
      return new StorageFullError(message);
    case 'closed':
      if ('what' in d) return new ClosedError(str(d.what));
      break;
    default:
      break;
  }
  return new IdemError(code, message, d);
}

export function errorFromWire(wire: unknown, fallbackStatus?: number): IdemError {
  const w = (typeof wire === 'object' && wire !== null ? wire : {}) as {
    code?: unknown;
    message?: unknown;
    details?: unknown;
  };
  if (typeof w.code !== 'string') {
    return new IdemError(
      'internal',
      `server replied with an unexpected error${fallbackStatus ? ` (HTTP ${fallbackStatus})` : ''}`,
      {
        status: fallbackStatus,
      },
    );
  }
  const message = typeof w.message === 'string' ? w.message : w.code;
  const details = (typeof w.details === 'object' && w.details !== null ? w.details : {}) as Details;
  const err = build(w.code as ErrorCode, message, details);
  // Keep the server's wording (it may add context the local constructor does not know).
  err.message = message;
  return err;
}
