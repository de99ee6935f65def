import type {
  Pool,
  PoolClient,
  QueryArrayConfig,
  QueryArrayResult,
  QueryConfig,
  QueryResult,
  QueryResultRow,
} from 'pg';

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

/**
 * Statements on clients kept checked out between statements that follow one another: a client goes
 * back to the pool a turn of the event loop after its last statement, so code that reads and appends
 * in a loop (each statement sent as the one before resolves, before the event loop turns) checks a
 * connection out once instead of once per statement, with the pool's idle timer set and cleared each
 * time. A client whose statement failed is destroyed, as `pool.query` does.
 *
 * Statements go through pg's callback form. Its promise form (8.23), on a client that sends statement
 * after statement, makes the young generation's collections slow (much of each statement's garbage
 * survives them): in a process doing nothing else, 3,000 reads of 100 rows on one checked-out client
 * spent 408 to 436 ms in scavenges that way and 66 to 73 ms this way (`pool.query`, which uses the
 * callback form, 84 to 93 ms). In the bench's process, with a larger heap, the two forms read alike
 * (docs/postgres.md, "The connection between statements").
 */
export class KeptClients {
  private readonly kept: CheckedOutClient[] = [];
  private releaseScheduled = false;

  constructor(private readonly pool: Pool) {}

  query<R extends unknown[]>(config: QueryArrayConfig): Promise<QueryArrayResult<R>>;
  query<R extends QueryResultRow>(config: QueryConfig): Promise<QueryResult<R>>;
  async query(config: QueryConfig): Promise<QueryResult> {
    const c = this.kept.pop() ?? (await checkout(this.pool));
    let r: QueryResult;
    try {
      r = await new Promise<QueryResult>((resolve, reject) => {
        c.client.query(config, (err: Error | null, result: QueryResult) =>
          err ? reject(err) : resolve(result),
        );
      });
    } catch (err) {
      c.release(err instanceof Error ? err : true);
      throw err;
    }
    this.kept.push(c);
    if (!this.releaseScheduled) {
      this.releaseScheduled = true;
      setImmediate(this.release);
    }
    return r;
  }

  /** Gives the kept clients back to the pool (a turn after a statement, and when their user closes). */
  readonly release = (): void => {
    this.releaseScheduled = false;
    for (const c of this.kept.splice(0)) c.release();
  };
}
