/**
 * Scenario 7: load. 8 appenders and 4 consumers on one SQLite store for 60 s (quick: 10 s); reports
 * append throughput, each consumer's lag when appending stops, p99 end-to-end latency (recordedAt to
 * the commit of the event's batch), and checks each consumer's output is the exactly-once result.
 */
import { join } from 'node:path';
import type { ConsumerTarget } from '../../src/core/consumerTarget.js';
import { createConsumer, type Consumer } from '../../src/consumer/consumer.js';
import type Database from 'better-sqlite3';
import { sqliteTarget, type SqliteTarget } from '../../src/sqlite/target.js';
import type { EventStore } from '../../src/core/eventStore.js';
import { openPostgresStore } from '../../src/postgres/postgresStore.js';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { createTempDatabase, type TempDatabase } from '../../test/support/postgres.js';
import { countOutput, createSqliteOutput, readSqliteOutput, sqliteRecorder } from '../output.js';
import { readEvents, type Backend } from '../stores.js';
import { emptyBody, type Scenario, type ScenarioBody, type ScenarioContext } from '../types.js';

const FILTER = { categories: ['load'] };

/** The store is SQLite or PostgreSQL; the consumers' targets are SQLite files either way. */
export function loadScenario(backend: Backend): Scenario {
  return {
    name: backend === 'sqlite' ? 'load-8-appenders-4-consumers' : 'load-8-appenders-4-consumers-postgres',
    proves: `under sustained load (8 appenders, 4 consumers) every consumer output equals the exactly-once result; reports throughput, lag and p99 latency (${backend === 'sqlite' ? 'SQLite' : 'PostgreSQL'} store)`,
    postgres: backend === 'postgres',
    run: (ctx) => run(ctx, backend),
  };
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** The target with commit-time latency measurement of the events its handler saw in the batch. */
function measured(
  target: SqliteTarget,
  pending: number[],
  latencies: number[],
): ConsumerTarget<Database.Database> {
  return {
    kind: target.kind,
    migrate: () => target.migrate(),
    transaction: async (fn) => {
      pending.length = 0;
      const result = await target.transaction(fn);
      const now = Date.now();
      for (const t of pending) latencies.push(now - t);
      pending.length = 0;
      return result;
    },
    readCheckpoint: (c) => target.readCheckpoint(c),
    ledgerSize: (c) => target.ledgerSize(c),
    counterValue: (c) => target.counterValue(c),
    close: () => target.close(),
  };
}

async function run(ctx: ScenarioContext, backend: Backend): Promise<ScenarioBody> {
  const durationMs = ctx.size === 'full' ? 60_000 : 10_000;
  const r = ctx.random;
  let database: TempDatabase | null = null;
  if (backend === 'postgres') database = await createTempDatabase('idem_faults');
  const store: EventStore =
    database === null
      ? await openSqliteStore({ path: join(ctx.dir, 'load.db') })
      : await openPostgresStore({ connectionString: database.connectionString });
  const targets: SqliteTarget[] = [];
  const consumers: Consumer[] = [];
  const latencies: number[] = [];
  const body = emptyBody();
  const names = ['load_a_v1', 'load_b_v1', 'load_c_v1', 'load_d_v1'];
  try {
    for (const name of names) {
      const t = sqliteTarget(join(ctx.dir, `${name}.db`), { durability: 'normal' });
      createSqliteOutput(t.db);
      targets.push(t);
      const record = sqliteRecorder(t.db, name);
      const pending: number[] = [];
      consumers.push(
        createConsumer({
          name,
          source: store,
          target: measured(t, pending, latencies),
          filter: FILTER,
          batch: { size: 200 },
          handle: (e) => {
            record(e);
            pending.push(Date.parse(e.recordedAt));
          },
        }),
      );
    }
    await Promise.all(consumers.map((c) => c.start()));
    let stop = false;
    let events = 0;
    let appends = 0;
    const started = Date.now();
    const appenders = Array.from({ length: 8 }, async (_, i) => {
      const ar = r.fork(`appender-${i}`);
      while (!stop) {
        const n = ar.int(1, 5);
        await store.append(
          `load-${ar.int(1, 500)}`,
          Array.from({ length: n }, (_, k) => ({ type: 'load.tick', data: { i, k } })),
        );
        events += n;
        appends++;
      }
    });
    const timer = new Promise<void>((resolve) => setTimeout(resolve, durationMs));
    await timer;
    stop = true;
    await Promise.all(appenders);
    const seconds = (Date.now() - started) / 1000;
    const lags = await Promise.all(names.map(async (n) => (await store.consumers.get(n)).lag));
    await Promise.all(consumers.map((c) => c.whenCaughtUp({ timeoutMs: 300_000 })));
    const stored = await readEvents(store, FILTER);
    for (let i = 0; i < names.length; i++) {
      const out = readSqliteOutput(targets[i]!.db, names[i]!);
      const c = countOutput(stored, out.applied, out.entities);
      body.lost += c.lost;
      body.doubled += c.doubled;
      body.outOfOrder += c.outOfOrder;
      const m = consumers[i]!.metrics();
      body.delivered += m.delivered;
      body.duplicates += m.duplicates;
    }
    latencies.sort((a, b) => a - b);
    body.events = stored.length * names.length;
    body.faults = `load ${Math.round(seconds)} s`;
    body.notes.push(
      `${Math.round(events / seconds)} events/s appended (${Math.round(appends / seconds)} appends/s, ${events} events)`,
      `lag at stop ${lags.join('/')} events`,
      `end-to-end p50 ${percentile(latencies, 50)} ms, p99 ${percentile(latencies, 99)} ms, max ${latencies.at(-1) ?? 0} ms`,
    );
    return body;
  } finally {
    await Promise.all(consumers.map((c) => c.stop().catch(() => undefined)));
    for (const t of targets) await t.close();
    await store.close();
    await database?.drop();
  }
}
