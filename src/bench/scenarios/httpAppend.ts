import { fork, type ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { connect } from '../../client/index.js';
import type { EventStore } from '../../core/eventStore.js';
import { openPostgresStore } from '../../postgres/index.js';
import { openSqliteStore } from '../../sqlite/index.js';
import type { StoreServerCommand, StoreServerMessage } from '../storeServerChild.js';
import { baselineRow, inRounds, row, type Timed } from '../measure.js';
import type { BenchRow, Scenario, ScenarioContext } from '../types.js';
import { appendInCalls } from './sqliteAppend.js';

const NAME = 'http-append';
const CALLERS = 16;

/**
 * The child process (storeServerChild.ts) that serves one store kind's rounds, each on a new store:
 * like a deployed server, it has run its code many times before a timed round.
 */
class ServerProcess {
  private readonly messages: StoreServerMessage[] = [];
  private heard: (() => void) | null = null;
  private stderr = '';
  private readonly exited: Promise<number | null>;

  private constructor(private readonly child: ChildProcess) {
    child.stderr?.on('data', (c: Buffer) => (this.stderr = (this.stderr + c.toString()).slice(-4000)));
    this.exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
    child.on('message', (m: StoreServerMessage) => {
      this.messages.push(m);
      this.heard?.();
    });
  }

  static start(): ServerProcess {
    // A sibling module: the .ts source under tsx (the child inherits the bench's loader), else the .js file.
    const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
    return new ServerProcess(
      fork(new URL(`../storeServerChild.${ext}`, import.meta.url), [], {
        stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      }),
    );
  }

  /** Opens a new store at `where` and starts the server on it; answers the server's URL. */
  async open(kind: 'sqlite' | 'postgres', where: string): Promise<string> {
    this.send({ kind: 'open', store: kind, where });
    const m = await this.next();
    if (m.kind !== 'ready') throw new Error(`${NAME}: the server process said ${m.kind}`);
    return m.url;
  }

  /** Closes the server and its store. */
  async shut(): Promise<void> {
    this.send({ kind: 'shut' });
    const m = await this.next();
    if (m.kind !== 'shut') throw new Error(`${NAME}: the server process said ${m.kind}`);
  }

  /** Ends the process (killed if it has not exited 10 s later). */
  async close(): Promise<void> {
    if (this.child.connected) this.send({ kind: 'close' });
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await this.exited;
    clearTimeout(timer);
  }

  private send(m: StoreServerCommand): void {
    this.child.send(m);
  }

  private async next(): Promise<StoreServerMessage> {
    while (this.messages.length === 0) {
      await Promise.race([
        new Promise<void>((resolve) => (this.heard = resolve)),
        this.exited.then((code) => {
          throw new Error(`${NAME}: the server process exited (${code}): ${this.stderr}`);
        }),
      ]);
    }
    const m = this.messages.shift()!;
    if (m.kind === 'error') throw new Error(`${NAME}: the server process: ${m.message}`);
    return m;
  }
}

/** `n / 5` appends of the measured shape, not timed, then `n` timed. */
async function warmThenTime(store: Pick<EventStore, 'append'>, n: number): Promise<Timed> {
  await appendInCalls(store, Math.max(CALLERS, Math.floor(n / 5)), 1, CALLERS, 'v7');
  return appendInCalls(store, n, 1, CALLERS, 'v7');
}

/** How the callers reach the store: in-process, or through `connect(url)` on its append WebSocket or over HTTP requests. */
type Transport = 'in-process' | 'socket' | 'http';

/** A new store's location: a file in a new directory (removed by `done`), or a new database. */
async function newStore(
  ctx: ScenarioContext,
  kind: 'sqlite' | 'postgres',
): Promise<{ where: string; done: () => Promise<void> }> {
  if (kind === 'postgres') return { where: await ctx.postgresDatabase(), done: () => Promise.resolve() };
  const dir = await ctx.tempDir();
  return { where: join(dir, 'idem.db'), done: () => rm(dir, { recursive: true, force: true }) };
}

/**
 * The server process of a store kind, started at its first use: before any round it serves
 * `warmUp` appends of the measured shape on the append WebSocket and a quarter as many over HTTP
 * requests, on a store of its own, not timed. A new server process runs its code unoptimised at
 * first, and its code that runs once per frame of 16 appends gets few calls: measured on a 2-vCPU
 * VM, a new server's rate went on rising for its first 20,000 (SQLite) to 40,000 (PostgreSQL)
 * appends, where a deployed server has long since warmed up.
 */
class ServerProcesses {
  private readonly started = new Map<'sqlite' | 'postgres', ServerProcess>();

  constructor(
    private readonly ctx: ScenarioContext,
    private readonly warmUp: number,
  ) {}

  async get(kind: 'sqlite' | 'postgres'): Promise<ServerProcess> {
    let server = this.started.get(kind);
    if (server !== undefined) return server;
    server = ServerProcess.start();
    this.started.set(kind, server);
    const { where, done } = await newStore(this.ctx, kind);
    try {
      const url = await server.open(kind, where);
      this.ctx.log(`${NAME}: warming the ${kind} server process up (${this.warmUp} appends, not timed)`);
      for (const [socket, n] of [
        [true, this.warmUp],
        [false, Math.max(CALLERS, Math.floor(this.warmUp / 4))],
      ] as const) {
        const remote = connect(url, { appendSocket: socket });
        try {
          await appendInCalls(remote, n, 1, CALLERS, 'v7');
        } finally {
          await remote.close();
        }
      }
      await server.shut();
    } finally {
      await done();
    }
    return server;
  }

  async close(): Promise<void> {
    await Promise.all([...this.started.values()].map((s) => s.close()));
  }
}

/**
 * `n` single-event appends from `CALLERS` concurrent callers to a new store: in-process (store and
 * callers in this process), or through `connect(url)` from this process to a server on that store in
 * a child process (warm: see `ServerProcesses`). Timed after `n / 5` appends of the same shape on the
 * same store (not timed).
 */
async function appends(
  ctx: ScenarioContext,
  servers: ServerProcesses,
  kind: 'sqlite' | 'postgres',
  transport: Transport,
  n: number,
): Promise<Timed> {
  const { where, done } = await newStore(ctx, kind);
  try {
    if (transport !== 'in-process') {
      const server = await servers.get(kind);
      const url = await server.open(kind, where);
      try {
        const remote = connect(url, { appendSocket: transport === 'socket' });
        try {
          return await warmThenTime(remote, n);
        } finally {
          await remote.close();
        }
      } finally {
        await server.shut();
      }
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
    await done();
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
    const servers = new ServerProcesses(ctx, ctx.size(3_200, 40_000, CALLERS));
    let m;
    try {
      m = await inRounds(
        ctx.rounds,
        {
          sqlite: { events: n, run: (e) => appends(ctx, servers, 'sqlite', 'in-process', e) },
          sqliteSocket: { events: n, run: (e) => appends(ctx, servers, 'sqlite', 'socket', e) },
          sqliteHttp: { events: n, run: (e) => appends(ctx, servers, 'sqlite', 'http', e) },
          postgres: { events: n, run: (e) => appends(ctx, servers, 'postgres', 'in-process', e) },
          postgresSocket: { events: n, run: (e) => appends(ctx, servers, 'postgres', 'socket', e) },
          postgresHttp: { events: n, run: (e) => appends(ctx, servers, 'postgres', 'http', e) },
        },
        { log: (message) => ctx.log(`${NAME}: ${message}`) },
      );
    } finally {
      await servers.close();
    }
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
