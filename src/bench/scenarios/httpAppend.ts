import { fork, type ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { connect } from '../../client/index.js';
import type { EventStore } from '../../core/eventStore.js';
import { openPostgresStore } from '../../postgres/index.js';
import { openSqliteStore } from '../../sqlite/index.js';
import type { StoreServerMessage } from '../storeServerChild.js';
import { baselineRow, inRounds, row, type Timed } from '../measure.js';
import type { BenchRow, Scenario, ScenarioContext } from '../types.js';
import { appendInCalls } from './sqliteAppend.js';

const NAME = 'http-append';
const CALLERS = 16;

/** A server on a new store in a child process (storeServerChild.ts), as deployed. */
async function serverInChild<T>(
  kind: 'sqlite' | 'postgres',
  where: string,
  use: (url: string) => Promise<T>,
): Promise<T> {
  // A sibling module: the .ts source under tsx (the child inherits the bench's loader), else the .js file.
  const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
  const child: ChildProcess = fork(new URL(`../storeServerChild.${ext}`, import.meta.url), [kind, where], {
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4000)));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      child.on('message', (m: StoreServerMessage) => {
        if (m.kind === 'ready') resolve(m.url);
        else reject(new Error(`${NAME}: server process: ${m.message}`));
      });
      void exited.then((code) => reject(new Error(`${NAME}: server process exited (${code}): ${stderr}`)));
    });
    return await use(url);
  } finally {
    if (child.connected) child.send({ kind: 'close' });
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

/** `n / 5` appends of the measured shape, not timed, then `n` timed. */
async function warmThenTime(store: Pick<EventStore, 'append'>, n: number): Promise<Timed> {
  await appendInCalls(store, Math.max(CALLERS, Math.floor(n / 5)), 1, CALLERS, 'v7');
  return appendInCalls(store, n, 1, CALLERS, 'v7');
}

/** How the callers reach the store: in-process, or through `connect(url)` on its append WebSocket or over HTTP requests. */
type Transport = 'in-process' | 'socket' | 'http';

/**
 * `n` single-event appends from `CALLERS` concurrent callers to a new store: in-process (store and
 * callers in this process), or through `connect(url)` from this process to a server on that store in
 * a child process. Timed after `n / 5` appends of the same shape (not timed): a new server process
 * runs its code unoptimised at first, where a deployed server has long since warmed up, and the
 * in-process store's code is warm from the rounds before.
 */
async function appends(
  ctx: ScenarioContext,
  kind: 'sqlite' | 'postgres',
  transport: Transport,
  n: number,
): Promise<Timed> {
  const dir = kind === 'sqlite' ? await ctx.tempDir() : undefined;
  const where = dir !== undefined ? join(dir, 'idem.db') : await ctx.postgresDatabase();
  try {
    if (transport !== 'in-process') {
      return await serverInChild(kind, where, async (url) => {
        const remote = connect(url, { appendSocket: transport === 'socket' });
        try {
          return await warmThenTime(remote, n);
        } finally {
          await remote.close();
        }
      });
    }
    const store: EventStore =
      kind === 'sqlite'
        ? await openSqliteStore({ path: where, durability: 'full' })
        : await openPostgresStore({ connectionString: where });
    try {
      return await warmThenTime(store, n);
    } finally {
      await store.close();
    }
  } finally {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Appends through the server (`connect(url)`, on its append WebSocket) against the same appends
 * in-process, on both stores; and the same over HTTP requests (`appendSocket: false`), for reference.
 */
export const httpAppend: Scenario = {
  name: NAME,
  description: `${CALLERS} concurrent single-event callers through connect(url) (append WebSocket, and HTTP requests) to a server in a child process vs in-process, SQLite and PostgreSQL`,
  needs: ['postgres'],
  async run(ctx) {
    const n = ctx.size(1_600, 10_000, CALLERS);
    const m = await inRounds(
      ctx.rounds,
      {
        sqlite: { events: n, run: (e) => appends(ctx, 'sqlite', 'in-process', e) },
        sqliteSocket: { events: n, run: (e) => appends(ctx, 'sqlite', 'socket', e) },
        sqliteHttp: { events: n, run: (e) => appends(ctx, 'sqlite', 'http', e) },
        postgres: { events: n, run: (e) => appends(ctx, 'postgres', 'in-process', e) },
        postgresSocket: { events: n, run: (e) => appends(ctx, 'postgres', 'socket', e) },
        postgresHttp: { events: n, run: (e) => appends(ctx, 'postgres', 'http', e) },
      },
      { log: (message) => ctx.log(`${NAME}: ${message}`) },
    );
    const out: BenchRow[] = [];
    for (const [label, local, socket, http] of [
      ['SQLite (durability full)', m.sqlite, m.sqliteSocket, m.sqliteHttp],
      ['PostgreSQL', m.postgres, m.postgresSocket, m.postgresHttp],
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
          shape: `${label}, ${CALLERS} concurrent callers, 1 event/call, through the server on connect(url)'s append WebSocket (from this process, server in a child process)`,
          measured: socket,
          against: base,
          target: { text: '>= 0.7x in-process', met: socket.eventsPerSec >= 0.7 * local.eventsPerSec },
        }),
        row({
          scenario: NAME,
          shape: `${label}, ${CALLERS} concurrent callers, 1 event/call, through the server over HTTP requests (connect(url, { appendSocket: false }))`,
          measured: http,
          against: base,
        }),
      );
    }
    return out;
  },
};
