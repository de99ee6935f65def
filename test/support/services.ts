import { execFile } from 'node:child_process';
import { connect } from 'node:net';

export type Service = 'postgres' | 'nats';

/** Where the test services listen; override with IDEM_PG_URL and IDEM_NATS_URL. */
export const POSTGRES_URL = process.env.IDEM_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const NATS_URL = process.env.IDEM_NATS_URL ?? 'nats://127.0.0.1:4222';

/** True when a TCP connection to host:port opens within `timeoutMs`. */
export function tcpReachable(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
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

function hostPort(url: string, defaultPort: number): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname || '127.0.0.1', port: u.port ? Number(u.port) : defaultPort };
}

const cache = new Map<Service, Promise<boolean>>();

/** True when PostgreSQL accepts connections at POSTGRES_URL (a real query, not just a TCP check). */
export function postgresAvailable(): Promise<boolean> {
  let p = cache.get('postgres');
  if (!p) {
    p = (async () => {
      const { host, port } = hostPort(POSTGRES_URL, 5432);
      if (!(await tcpReachable(host, port))) return false;
      const pg = await import('pg');
      const client = new pg.default.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 2000 });
      try {
        await client.connect();
        await client.query('select 1');
        return true;
      } catch {
        return false;
      } finally {
        await client.end().catch(() => undefined);
      }
    })();
    cache.set('postgres', p);
  }
  return p;
}

/** True when something accepts TCP connections at NATS_URL (127.0.0.1:4222 by default). */
export function natsAvailable(): Promise<boolean> {
  let p = cache.get('nats');
  if (!p) {
    const { host, port } = hostPort(NATS_URL, 4222);
    p = tcpReachable(host, port);
    cache.set('nats', p);
  }
  return p;
}

/** True when IDEM_REQUIRE_SERVICES=1: a missing service must fail the run instead of skipping. */
export function servicesRequired(): boolean {
  return process.env.IDEM_REQUIRE_SERVICES === '1';
}

/**
 * Decides what a test needing `service` does when it is down. Resolves `false` when the service is
 * up; a one-line skip reason when it is down on a local run; rejects when IDEM_REQUIRE_SERVICES=1.
 *
 * ```ts
 * const skip = await requireOrSkip('postgres');
 * describe('postgres store', { skip }, () => { ... });
 * ```
 */
export async function requireOrSkip(service: Service): Promise<string | false> {
  const up = service === 'postgres' ? await postgresAvailable() : await natsAvailable();
  if (up) return false;
  const where = service === 'postgres' ? POSTGRES_URL : NATS_URL;
  if (servicesRequired()) {
    throw new Error(`${service} is required (IDEM_REQUIRE_SERVICES=1) but unreachable at ${where}`);
  }
  return `${service} unreachable at ${where} (set IDEM_REQUIRE_SERVICES=1 to fail instead)`;
}

/** Interpreters tried for the Python example, in order: IDEM_PYTHON, Debian's python3, the one on PATH. */
function pythonCandidates(): string[] {
  const list = [process.env.IDEM_PYTHON, '/usr/bin/python3', 'python3'];
  return [...new Set(list.filter((p): p is string => p !== undefined && p.length > 0))];
}

let pythonFound: Promise<string | null> | undefined;

/** The first python3 that imports `websockets` and `sqlite3` (all the Python example needs), or null. */
export function pythonWithWebsockets(): Promise<string | null> {
  pythonFound ??= (async () => {
    for (const python of pythonCandidates()) {
      const ok = await new Promise<boolean>((resolve) =>
        execFile(python, ['-c', 'import sqlite3, websockets'], { timeout: 10_000 }, (err) => resolve(!err)),
      );
      if (ok) return python;
    }
    return null;
  })();
  return pythonFound;
}

/**
 * As `requireOrSkip`, for python3 with the `websockets` package (Debian: python3-websockets):
 * resolves the interpreter, or a one-line skip reason on a local run; rejects when
 * IDEM_REQUIRE_SERVICES=1.
 */
export async function requirePythonOrSkip(): Promise<{ python: string } | { skip: string }> {
  const python = await pythonWithWebsockets();
  if (python !== null) return { python };
  const tried = pythonCandidates().join(', ');
  if (servicesRequired()) {
    throw new Error(`python3 with websockets is required (IDEM_REQUIRE_SERVICES=1); tried ${tried}`);
  }
  return {
    skip: `no python3 with websockets (tried ${tried}; apt-get install python3-websockets, or set IDEM_PYTHON)`,
  };
}

/** The Chromium the browser tests drive: IDEM_CHROMIUM, or Debian's /usr/bin/chromium. */
export function chromiumPath(): string {
  return process.env.IDEM_CHROMIUM ?? '/usr/bin/chromium';
}

/**
 * As `requireOrSkip`, for Chromium (Debian: chromium): resolves its path, or a one-line skip reason on
 * a local run; rejects when IDEM_REQUIRE_SERVICES=1.
 */
export async function requireChromiumOrSkip(): Promise<{ chromium: string } | { skip: string }> {
  const path = chromiumPath();
  const ok = await new Promise<boolean>((resolve) =>
    execFile(path, ['--version'], { timeout: 20_000 }, (err) => resolve(!err)),
  );
  if (ok) return { chromium: path };
  if (servicesRequired())
    throw new Error(`chromium is required (IDEM_REQUIRE_SERVICES=1) but ${path} does not run`);
  return { skip: `no chromium at ${path} (apt-get install chromium, or set IDEM_CHROMIUM)` };
}
