import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Command } from 'commander';
import { IdemError } from '../core/errors.js';
import type { EventStore } from '../core/eventStore.js';
import { redactConnectionString } from './redact.js';
import { UsageError } from './usageError.js';

/** The options every store verb takes. */
export interface StoreFlags {
  db?: string;
  postgres?: string;
  url?: string;
  json?: boolean;
}

export const DEFAULT_DB = './data/idem.db';

/** Adds `--db`, `--postgres`, `--url` and `--json` to a verb. */
export function withStoreOptions(cmd: Command): Command {
  return cmd
    .option('--db <path>', `embedded SQLite store file (default: ${DEFAULT_DB}; the directory is created)`)
    .option('--postgres <url>', 'PostgreSQL store connection string (or env IDEM_POSTGRES_URL)')
    .option('--url <url>', 'a running idem server, e.g. http://127.0.0.1:4680 (token from env IDEM_TOKEN)')
    .option('--json', 'machine-readable output on stdout');
}

export type StoreTarget =
  | { kind: 'sqlite'; path: string }
  | { kind: 'postgres'; connectionString: string }
  | { kind: 'remote'; url: string; token?: string };

/**
 * Decides which store the flags name: at most one of `--db`, `--postgres`, `--url`; with none, the
 * `IDEM_POSTGRES_URL` environment variable, else the embedded store at `./data/idem.db`.
 */
export function storeTarget(flags: StoreFlags, env: NodeJS.ProcessEnv = process.env): StoreTarget {
  const given = (['db', 'postgres', 'url'] as const).filter((k) => flags[k] !== undefined);
  if (given.length > 1)
    throw new UsageError(
      `choose one of --db, --postgres and --url (got ${given.map((k) => `--${k}`).join(' and ')})`,
    );
  if (flags.url !== undefined) {
    const token = env.IDEM_TOKEN;
    return token ? { kind: 'remote', url: flags.url, token } : { kind: 'remote', url: flags.url };
  }
  const pg = flags.postgres ?? (flags.db === undefined ? env.IDEM_POSTGRES_URL : undefined);
  if (pg !== undefined && pg !== '') return { kind: 'postgres', connectionString: pg };
  return { kind: 'sqlite', path: resolve(flags.db ?? DEFAULT_DB) };
}

export function describeTarget(t: StoreTarget): string {
  switch (t.kind) {
    case 'sqlite':
      return t.path;
    case 'postgres':
      return redactConnectionString(t.connectionString);
    case 'remote':
      return redactConnectionString(t.url);
  }
}

/** The text of a driver's error with the raw connection string (should the driver quote it) masked too. */
function scrubbed(message: string, target: StoreTarget): string {
  const raw =
    target.kind === 'postgres' ? target.connectionString : target.kind === 'remote' ? target.url : '';
  return raw === '' ? message : message.split(raw).join(describeTarget(target));
}

type Factory = (...args: never[]) => unknown;

/**
 * Loads an optional part of idem by path. The specifier is a variable so that the CLI builds and runs
 * even where that part (or its driver, such as `pg`) is not installed; a missing one gets a clear message.
 */
async function load<T extends Factory>(specifier: string, exportName: string, what: string): Promise<T> {
  let mod: Record<string, unknown>;
  try {
    mod = (await import(specifier)) as Record<string, unknown>;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'ERR_MODULE_NOT_FOUND') {
      const pkg = /Cannot find (?:package|module) '([^']+)'/.exec(e.message)?.[1];
      const hint =
        pkg && !pkg.startsWith('/') && !pkg.startsWith('.') ? `; install it with \`npm install ${pkg}\`` : '';
      throw new IdemError(
        'unavailable',
        `${what} is not available: ${pkg ?? e.message} is missing${hint}`,
        {},
        { cause: err },
      );
    }
    throw err;
  }
  const factory = mod[exportName];
  if (typeof factory !== 'function')
    throw new IdemError('unavailable', `${what} is not available in this build (no ${exportName})`);
  return factory as T;
}

/** Opens the store; a failure to open (bad path, refused connection) names the store it tried. */
export async function openStore(target: StoreTarget): Promise<EventStore> {
  try {
    return await openTarget(target);
  } catch (err) {
    if (err instanceof IdemError) throw err;
    const why = scrubbed(err instanceof Error ? err.message : String(err), target);
    throw new IdemError(
      'unavailable',
      `cannot open the store at ${describeTarget(target)}: ${why}`,
      {},
      { cause: err },
    );
  }
}

async function openTarget(target: StoreTarget): Promise<EventStore> {
  switch (target.kind) {
    case 'sqlite': {
      mkdirSync(dirname(target.path), { recursive: true });
      const open = await load<(o: { path: string }) => EventStore | Promise<EventStore>>(
        '../sqlite/index.js',
        'openSqliteStore',
        'the embedded SQLite store',
      );
      return await open({ path: target.path });
    }
    case 'postgres': {
      const open = await load<(o: { connectionString: string }) => EventStore | Promise<EventStore>>(
        '../postgres/index.js',
        'openPostgresStore',
        'the PostgreSQL store',
      );
      return await open({ connectionString: target.connectionString });
    }
    case 'remote': {
      const connect = await load<(url: string, o: { token?: string }) => EventStore | Promise<EventStore>>(
        '../client/index.js',
        'connect',
        'the remote client',
      );
      return await connect(target.url, target.token === undefined ? {} : { token: target.token });
    }
  }
}

/** Opens the store the flags (and `env`) name, runs `fn`, and always closes the store. */
export async function withStore<T>(
  flags: StoreFlags,
  env: NodeJS.ProcessEnv,
  fn: (store: EventStore, target: StoreTarget) => Promise<T>,
): Promise<T> {
  const target = storeTarget(flags, env);
  const store = await openStore(target);
  try {
    return await fn(store, target);
  } finally {
    await store.close();
  }
}
