import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { connect } from '../../client/index.js';
import type { EventStore } from '../../core/eventStore.js';
import { openPostgresStore } from '../../postgres/index.js';
import { startServer } from '../../server/index.js';
import { openSqliteStore } from '../../sqlite/index.js';
import { baselineRow, inRounds, row, type Timed } from '../measure.js';
import type { BenchRow, Scenario, ScenarioContext } from '../types.js';
import { appendInCalls } from './sqliteAppend.js';

const NAME = 'http-append';
const CALLERS = 16;

/**
 * `n` single-event appends from `CALLERS` concurrent callers to a new store: in-process, or through
 * `connect(url)` to a server on that store (in this process, on a loopback port).
 */
async function appends(
  ctx: ScenarioContext,
  kind: 'sqlite' | 'postgres',
  overHttp: boolean,
  n: number,
): Promise<Timed> {
  let dir: string | undefined;
  let store: EventStore;
  if (kind === 'sqlite') {
    dir = await ctx.tempDir();
    store = await openSqliteStore({ path: join(dir, 'idem.db'), durability: 'full' });
  } else {
    store = await openPostgresStore({ connectionString: await ctx.postgresDatabase() });
  }
  try {
    if (!overHttp) return await appendInCalls(store, n, 1, CALLERS, 'v7');
    const server = await startServer({ store, port: 0 });
    const remote = connect(server.url);
    try {
      return await appendInCalls(remote, n, 1, CALLERS, 'v7');
    } finally {
      await remote.close();
      await server.close();
    }
  } finally {
    await store.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  }
}

/** Appends through the server (`connect(url)`) against the same appends in-process, on both stores. */
export const httpAppend: Scenario = {
  name: NAME,
  description: `${CALLERS} concurrent single-event callers through connect(url) and the server vs in-process, SQLite and PostgreSQL`,
  needs: ['postgres'],
  async run(ctx) {
    const n = ctx.size(1_600, 10_000, CALLERS);
    const m = await inRounds(
      ctx.rounds,
      {
        sqlite: { events: n, run: (e) => appends(ctx, 'sqlite', false, e) },
        sqliteHttp: { events: n, run: (e) => appends(ctx, 'sqlite', true, e) },
        postgres: { events: n, run: (e) => appends(ctx, 'postgres', false, e) },
        postgresHttp: { events: n, run: (e) => appends(ctx, 'postgres', true, e) },
      },
      { log: (message) => ctx.log(`${NAME}: ${message}`) },
    );
    const out: BenchRow[] = [];
    for (const [label, local, remote] of [
      ['SQLite (durability full)', m.sqlite, m.sqliteHttp],
      ['PostgreSQL', m.postgres, m.postgresHttp],
    ] as const) {
      const base = baselineRow(
        NAME,
        `${label}, ${CALLERS} concurrent callers, 1 event/call, in-process`,
        local,
      );
      out.push(
        base,
        row({
          scenario: NAME,
          shape: `${label}, ${CALLERS} concurrent callers, 1 event/call, over HTTP (connect(url), server in this process)`,
          measured: remote,
          against: base,
          target: { text: '>= 0.7x in-process', met: remote.eventsPerSec >= 0.7 * local.eventsPerSec },
        }),
      );
    }
    return out;
  },
};
