/**
 * Scenario 3: three consumers read from the server through a TCP proxy that cuts every connection at
 * random moments, and once stays down for longer than the lease TTL. Each consumer reconnects and
 * resumes from its acknowledged cursor; the output of each must be exactly once, in entity order.
 */
import { join } from 'node:path';
import { connect } from '../../src/client/connect.js';
import { createConsumer, type Consumer } from '../../src/consumer/consumer.js';
import { sqliteTarget, type SqliteTarget } from '../../src/sqlite/target.js';
import { createTempDatabase, type TempDatabase } from '../../test/support/postgres.js';
import { countOutput, createSqliteOutput, readSqliteOutput, sqliteRecorder } from '../output.js';
import { ScriptRunner, delay } from '../processes.js';
import { CuttingProxy } from '../proxy.js';
import { startServerChild, type ServerProcess } from '../serverChildren.js';
import { readEvents, type Backend } from '../stores.js';
import { emptyBody, type Scenario, type ScenarioBody, type ScenarioContext } from '../types.js';

const FILTER = { categories: ['order'] };
const LEASE_TTL_MS = 1000;

/** The server's store is SQLite or PostgreSQL; the consumers' targets are SQLite files either way. */
export function networkCutsScenario(backend: Backend): Scenario {
  return {
    name: backend === 'sqlite' ? 'network-cuts-remote' : 'network-cuts-remote-postgres',
    proves: `consumers over the remote client lose and double nothing when a proxy cuts their connections, once for longer than the lease TTL (server on a ${backend === 'sqlite' ? 'SQLite' : 'PostgreSQL'} store)`,
    postgres: backend === 'postgres',
    run: (ctx) => run(ctx, backend),
  };
}

async function run(ctx: ScenarioContext, backend: Backend): Promise<ScenarioBody> {
  const full = ctx.size === 'full';
  const durationMs = full ? 40_000 : 8_000;
  const r = ctx.random;
  const runner = new ScriptRunner(ctx.dir);
  let database: TempDatabase | null = null;
  if (backend === 'postgres') database = await createTempDatabase('idem_faults');
  const store =
    database === null
      ? { kind: 'sqlite' as const, path: join(ctx.dir, 'server.db'), durability: 'normal' as const }
      : { kind: 'postgres' as const, url: database.connectionString };
  let server: ServerProcess | null = await startServerChild(runner, { store, port: 0 });
  const proxy = await CuttingProxy.start('127.0.0.1', server.port);
  const direct = connect(server.url);
  const remote = connect(proxy.url, { timeoutMs: 5000 });
  const targets: SqliteTarget[] = [];
  const consumers: Consumer[] = [];
  const body = emptyBody();
  try {
    const names = ['orders_a_v1', 'orders_b_v1', 'orders_c_v1'];
    for (const name of names) {
      const target = sqliteTarget(join(ctx.dir, `${name}.db`), { durability: 'normal' });
      createSqliteOutput(target.db);
      const record = sqliteRecorder(target.db, name);
      targets.push(target);
      consumers.push(
        createConsumer({
          name,
          source: remote,
          target,
          filter: FILTER,
          leaseTtlMs: LEASE_TTL_MS,
          batch: { size: 50 },
          reconnect: { initialDelayMs: 20, maxDelayMs: 300 },
          handle: (e) => record(e),
        }),
      );
    }
    await Promise.all(consumers.map((c) => c.start()));
    let appending = true;
    const appendLoop = (async () => {
      const ar = r.fork('appends');
      while (appending) {
        const n = ar.int(1, 5);
        await direct.append(
          `order-${ar.int(1, 30)}`,
          Array.from({ length: n }, (_, i) => ({ type: 'order.placed', data: { i } })),
        );
        await delay(ar.int(0, 10));
      }
    })();
    const started = Date.now();
    let longDown = false;
    while (Date.now() - started < durationMs) {
      await delay(r.int(150, 700));
      if (!longDown && Date.now() - started > durationMs / 2) {
        longDown = true;
        proxy.down(LEASE_TTL_MS * 2.5);
        ctx.log(`proxy down for ${LEASE_TTL_MS * 2.5} ms`);
      } else proxy.cut();
    }
    appending = false;
    await appendLoop;
    await Promise.all(consumers.map((c) => c.whenCaughtUp({ timeoutMs: 120_000 })));
    await Promise.all(consumers.map((c) => c.stop()));
    {
      // Read back through the server, so the check is the same for either store.
      const events = await readEvents(direct, FILTER);
      for (let i = 0; i < names.length; i++) {
        const out = readSqliteOutput(targets[i]!.db, names[i]!);
        const c = countOutput(events, out.applied, out.entities);
        body.lost += c.lost;
        body.doubled += c.doubled;
        body.outOfOrder += c.outOfOrder;
        const m = consumers[i]!.metrics();
        body.delivered += m.delivered;
        body.duplicates += m.duplicates;
      }
      body.events = events.length * names.length;
      body.notes.push(
        `${events.length} events x 3 consumers`,
        `reconnects ${consumers.map((c) => c.metrics().reconnects).join('/')}`,
      );
    }
    body.faultCount = proxy.cuts;
    body.faults = `${proxy.cuts} connection cuts (1 down ${LEASE_TTL_MS * 2.5} ms > lease ${LEASE_TTL_MS} ms)`;
    return body;
  } finally {
    await Promise.all(consumers.map((c) => c.stop().catch(() => undefined)));
    for (const t of targets) await t.close();
    await remote.close();
    await direct.close();
    await proxy.close();
    if (server) await server.child.kill();
    server = null;
    await database?.drop();
  }
}
