import { connect } from 'node:net';

export type Service = 'postgres';

/** Where the test PostgreSQL listens; override with IDEM_PG_URL. */
export const POSTGRES_URL = process.env.IDEM_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

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

let postgresUp: Promise<boolean> | undefined;

/** True when PostgreSQL accepts connections at POSTGRES_URL (a real query, not just a TCP check). */
export function postgresAvailable(): Promise<boolean> {
  postgresUp ??= (async () => {
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
  return postgresUp;
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
  if (await postgresAvailable()) return false;
  if (servicesRequired()) {
    throw new Error(`${service} is required (IDEM_REQUIRE_SERVICES=1) but unreachable at ${POSTGRES_URL}`);
  }
  return `${service} unreachable at ${POSTGRES_URL} (set IDEM_REQUIRE_SERVICES=1 to fail instead)`;
}
