import { IdemError, StorageFullError } from '../core/errors.js';
import type { KnownKeys } from '../core/knownKeys.js';

/** SQLSTATE classes and codes after which the same statement may succeed on a new connection. */
const RETRYABLE_CODES = new Set([
  '57P01', // admin_shutdown: pg_terminate_backend, server shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now: server starting up
  '08000', // connection_exception
  '08001', // sqlclient_unable_to_establish_sqlconnection
  '08003', // connection_does_not_exist
  '08004', // sqlserver_rejected_establishment_of_sqlconnection
  '08006', // connection_failure
  '40001', // serialization_failure
  '40P01', // deadlock_detected
]);

const NODE_NET_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTCONN',
]);

/**
 * True for an error that says the connection (not the statement) failed: the backend was terminated,
 * the socket dropped, or the server is restarting. The statement may or may not have committed.
 */
export function isConnectionFault(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && (RETRYABLE_CODES.has(code) || NODE_NET_CODES.has(code))) return true;
  return /Connection terminated|connection timeout|terminating connection|Client has encountered a connection error|not queryable/i.test(
    err.message,
  );
}

/** The PostgreSQL SQLSTATE of an error, if it has one. */
export function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** Maps PostgreSQL errors that have an idem meaning; returns other errors unchanged. */
export function translatePgError(err: unknown): unknown {
  if (sqlState(err) === '53100') {
    return new StorageFullError('the PostgreSQL server is out of disk space', { cause: err });
  }
  return err;
}

/** How `withReconnect` retries. */
export interface RetryOptions {
  /** Tries in all, the first included. @default 8 */
  attempts?: number;
  /** Wait before the second try; it doubles each time up to 1 s. @default 20 */
  initialDelayMs?: number;
}

export const RETRY_OPTION_KEYS = {
  attempts: true,
  initialDelayMs: true,
} as const satisfies KnownKeys<RetryOptions>;

/**
 * Runs `op`, and runs it again (after a short, growing wait) when it fails with a connection fault,
 * so a terminated backend or a dropped socket costs a retry on a fresh connection, not an error.
 * Only for operations that are safe to repeat: reads, and appends (idempotent by event id).
 * When every try failed that way, the error is `unavailable` (with the last fault as its cause).
 * `onFault` hears about each fault, e.g. to remember that an append's outcome became unknown.
 */
export async function withReconnect<T>(
  op: () => Promise<T>,
  options: RetryOptions = {},
  onFault?: (err: unknown) => void,
): Promise<T> {
  const attempts = options.attempts ?? 8;
  let delay = options.initialDelayMs ?? 20;
  for (let i = 1; ; i++) {
    try {
      return await op();
    } catch (err) {
      if (!isConnectionFault(err)) throw translatePgError(err);
      if (i >= attempts) {
        throw new IdemError(
          'unavailable',
          `PostgreSQL is unreachable or keeps dropping the connection (${attempts} tries): ${(err as Error).message}`,
          { attempts },
          { cause: err },
        );
      }
      onFault?.(err);
      await new Promise<void>((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 1000);
    }
  }
}
