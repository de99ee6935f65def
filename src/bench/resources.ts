import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as Pg from 'pg';

/** The server the PostgreSQL scenarios use unless told otherwise. */
export const DEFAULT_POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * Runs `sync` (flush every dirty page of the OS to disk) and returns how long it took in seconds, or
 * null where there is no `sync` command. The bench only measures after it, so never fails on it.
 */
export function flushDirtyPages(): Promise<number | null> {
  const t0 = process.hrtime.bigint();
  return new Promise((resolve) => {
    execFile('sync', { timeout: 120_000 }, (err) =>
      resolve(err ? null : Number(process.hrtime.bigint() - t0) / 1e9),
    );
  });
}

/** Loads `pg` (an optional peer dependency) only for the scenarios that need it. */
export async function loadPgModule(): Promise<typeof Pg> {
  const mod = (await import('pg')) as typeof Pg & { default?: typeof Pg };
  return mod.default ?? mod;
}

/**
 * What a run creates and must remove at the end: temporary directories and PostgreSQL databases.
 * `cleanup` removes everything even when a scenario failed half way.
 */
export class BenchResources {
  private readonly dirs: string[] = [];
  private readonly databases: string[] = [];
  private closed = false;

  constructor(private readonly postgresUrl: string) {}

  async tempDir(): Promise<string> {
    this.assertOpen();
    const dir = await mkdtemp(join(tmpdir(), 'idem-bench-'));
    if (this.closed) {
      await rm(dir, { recursive: true, force: true });
      this.assertOpen();
    }
    this.dirs.push(dir);
    return dir;
  }

  /**
   * Creates a database with a random name and returns a connection string for it. `settings` are
   * applied to it with `ALTER DATABASE ... SET`, e.g. `track_functions = 'all'`.
   */
  async postgresDatabase(settings: readonly string[] = []): Promise<string> {
    this.assertOpen();
    const name = `idem_bench_${randomBytes(6).toString('hex')}`;
    await this.admin(`create database "${name}"`);
    this.databases.push(name);
    for (const setting of settings) await this.admin(`alter database "${name}" set ${setting}`);
    if (this.closed) {
      await this.admin(`drop database if exists "${name}" with (force)`);
      this.assertOpen();
    }
    const url = new URL(this.postgresUrl);
    url.pathname = `/${name}`;
    return url.toString();
  }

  /** A one-line reason when PostgreSQL does not accept connections, else null. */
  async postgresUnavailable(): Promise<string | null> {
    const url = new URL(this.postgresUrl);
    const host = url.hostname || '127.0.0.1';
    const port = url.port ? Number(url.port) : 5432;
    if (!(await tcpReachable(host, port, 1000))) return `PostgreSQL unreachable at ${host}:${port}`;
    try {
      await this.admin('select 1');
      return null;
    } catch (err) {
      return `PostgreSQL at ${host}:${port} refused the connection (${(err as Error).message})`;
    }
  }

  /**
   * After this, `tempDir` and `postgresDatabase` refuse (a run interrupted by a signal must not create
   * anything that its final `cleanup` would miss); `cleanup` still removes what exists.
   */
  close(): void {
    this.closed = true;
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('the bench is stopping (interrupted): no new files or databases');
  }

  async cleanup(): Promise<string[]> {
    const problems: string[] = [];
    for (const dir of this.dirs.splice(0)) {
      await rm(dir, { recursive: true, force: true }).catch((err: unknown) =>
        problems.push(`${dir}: ${String(err)}`),
      );
    }
    for (const name of this.databases.splice(0)) {
      await this.admin(`drop database if exists "${name}" with (force)`).catch((err: unknown) =>
        problems.push(`database ${name}: ${String(err)}`),
      );
    }
    return problems;
  }

  private async admin(sql: string): Promise<void> {
    const pg = await loadPgModule();
    const client = new pg.Client({ connectionString: this.postgresUrl, connectionTimeoutMillis: 3000 });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  }
}

function tcpReachable(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}
