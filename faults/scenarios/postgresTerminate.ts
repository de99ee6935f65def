/**
 * Scenario 6a: PostgreSQL backends terminated at random (`pg_terminate_backend`) while 8 appenders write
 * and a consumer commits into a PostgreSQL target. Appends cut mid-flight are retried with the same ids;
 * the consumer reconnects. Every acknowledged append is stored once, and the output is exactly once.
 */
import pg from 'pg';
import { createConsumer } from '../../src/consumer/consumer.js';
import { isIdemError } from '../../src/core/errors.js';
import { openPostgresStore } from '../../src/postgres/postgresStore.js';
import { postgresTarget } from '../../src/postgres/target.js';
import { createTempDatabase } from '../../test/support/postgres.js';
import { checkAppends, retryingAppender } from '../appendCheck.js';
import { countOutput, createPostgresOutput, postgresRecord, readPostgresOutput } from '../output.js';
import { caughtUpWhileMoving } from '../catchUp.js';
import { delay } from '../processes.js';
import { readEvents } from '../stores.js';
import { emptyBody, type Scenario, type ScenarioBody, type ScenarioContext } from '../types.js';

const CONSUMER = 'pgfault_v1';
const FILTER = { categories: ['pgf'] };

export const postgresTerminateScenario: Scenario = {
  name: 'pg-terminate-backend',
  proves:
    'terminated PostgreSQL connections during appends and consumer commits lose and double nothing (retries with the same ids, consumer reconnects)',
  postgres: true,
  run,
};

/** A fault of the connection (terminated backend, reset socket): the outcome is unknown, so retry. */
function connectionFault(err: unknown): boolean {
  if (isIdemError(err, 'unavailable')) return true;
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  return (
    code === '57P01' ||
    code === 'ECONNRESET' ||
    /terminat|Connection terminated|ECONNRESET|not queryable/i.test(message)
  );
}

async function run(ctx: ScenarioContext): Promise<ScenarioBody> {
  const durationMs = ctx.size === 'full' ? 30_000 : 5_000;
  const r = ctx.random;
  const database = await createTempDatabase('idem_faults');
  const store = await openPostgresStore({ connectionString: database.connectionString, poolSize: 6 });
  const pool = new pg.Pool({ connectionString: database.connectionString, max: 3 });
  pool.on('error', () => undefined);
  const admin = new pg.Client({ connectionString: database.connectionString });
  const body = emptyBody();
  try {
    await admin.connect();
    await createPostgresOutput(pool);
    const target = postgresTarget(pool);
    const consumer = createConsumer({
      name: CONSUMER,
      source: store,
      target,
      filter: FILTER,
      batch: { size: 50 },
      leaseTtlMs: 1000,
      reconnect: { initialDelayMs: 20, maxDelayMs: 300 },
      handle: (e, c) => postgresRecord(c.tx, CONSUMER, e),
    });
    await consumer.start();
    let stop = false;
    const appenders = Array.from({ length: 8 }, (_, i) =>
      retryingAppender(store, `pgf-${i}`, r.fork(`a${i}`), () => stop, connectionFault),
    );
    let terminated = 0;
    const started = Date.now();
    while (Date.now() - started < durationMs) {
      await delay(r.int(30, 250));
      const pids = await admin.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
      );
      if (pids.rows.length === 0) continue;
      const victim = r.pick(pids.rows).pid;
      const t = await admin.query<{ ok: boolean }>('SELECT pg_terminate_backend($1) AS ok', [victim]);
      if (t.rows[0]?.ok) terminated++;
    }
    stop = true;
    const results = await Promise.all(appenders);
    const duringFaults = consumer.status().position;
    const headAfterFaults = await store.headPosition();
    const catchUpStarted = Date.now();
    // 3 statements per event, one round trip each: the catch-up after 30 s of appends may take minutes.
    await caughtUpWhileMoving(consumer);
    const catchUpMs = Date.now() - catchUpStarted;
    await consumer.stop();
    const a = await checkAppends(store, results);
    const out = await readPostgresOutput(pool, CONSUMER);
    const c = countOutput(await readEvents(store, FILTER), out.applied, out.entities);
    const m = consumer.metrics();
    body.events = results.reduce((n, x) => n + x.acked.reduce((k, y) => k + y.ids.length, 0), 0);
    body.delivered = m.delivered;
    body.duplicates = m.duplicates + results.reduce((n, x) => n + x.duplicates, 0);
    body.lost = a.lost + c.lost;
    body.doubled = a.doubled + c.doubled;
    body.outOfOrder = a.outOfOrder + c.outOfOrder;
    body.faultCount = terminated;
    body.faults = `${terminated} backends terminated`;
    body.notes.push(
      `${results.reduce((n, x) => n + x.retries, 0)} append retries`,
      `consumer reconnects ${m.reconnects}`,
      `consumer at position ${duringFaults} when the faults ended (head ${headAfterFaults}), caught up ${catchUpMs} ms later`,
    );
    const unexpected = results.flatMap((x) => x.unexpected);
    if (unexpected.length > 0)
      body.error = `append errors that are not connection faults: ${unexpected.slice(0, 3).join('; ')}`;
    return body;
  } finally {
    await admin.end().catch(() => undefined);
    await store.close();
    await pool.end().catch(() => undefined);
    await database.drop();
  }
}
