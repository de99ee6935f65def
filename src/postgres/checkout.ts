import type { Pool, PoolClient } from 'pg';

/** A pooled client checked out for a transaction; `release` gives it back (or destroys it). */
export interface CheckedOutClient {
  client: PoolClient;
  /**
   * Returns the client to the pool, or destroys it when `destroy` is an error or `true`, or when its
   * connection failed while it was checked out. Safe to call twice.
   */
  release: (destroy?: Error | boolean) => void;
}

/**
 * Checks a client out of `pool` with an `error` listener attached for as long as it is out.
 *
 * pg-pool listens for a client's `error` event only while the client is idle in the pool. A backend
 * terminated (or a socket reset) between two queries of a checked-out client emits `error` with no
 * listener, and Node ends the process. With this listener the failure is recorded instead; the next
 * query fails with it, and the client is destroyed rather than reused.
 */
export async function checkout(pool: Pool): Promise<CheckedOutClient> {
  const client = await pool.connect();
  let failure: Error | undefined;
  const onError = (err: Error): void => {
    failure = err;
  };
  client.on('error', onError);
  let released = false;
  return {
    client,
    release: (destroy) => {
      if (released) return;
      released = true;
      client.off('error', onError);
      client.release(failure ?? destroy ?? false);
    },
  };
}

/** Pools that already have the idle-connection error listener (added once, however many users share a pool). */
const guardedPools = new WeakSet<Pool>();

/**
 * Keeps an idle pooled connection that dies (server restart, `pg_terminate_backend`, a network cut)
 * from ending the process: pg-pool drops such a client and emits `error` on the pool, which throws
 * when nothing listens. The next query opens a new connection. Idempotent per pool.
 */
export function guardPool(pool: Pool): void {
  if (guardedPools.has(pool)) return;
  guardedPools.add(pool);
  pool.on('error', () => undefined);
}
