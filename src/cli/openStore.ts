import { resolve } from 'node:path';
import type { Command } from 'commander';
import { IdemError, StoreNotFoundError } from '../core/errors.js';
import type { EventStore } from '../core/eventStore.js';
import type { Io } from './output.js';
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
    .option(
      '--db <path>',
      `embedded SQLite store file (default: ${DEFAULT_DB}); only append and serve create it`,
    )
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

/**
 * Whether a verb may create the store it names. Only `append` and `serve` do (and say so): a read
 * verb pointed at a mistyped path must fail with "no store at PATH", not answer from a new, empty store.
 */
export interface OpenStoreOptions {
  /** Create a missing store (SQLite file, PostgreSQL schema), then call this with what was created. */
  onCreate?: (created: string) => void;
}

/** For `append` and `serve`: create a missing store, and say so on stderr (even with `--json`). */
export function creatingStore(io: Io): OpenStoreOptions {
  return { onCreate: (created) => io.stderr.write(`idem: ${created}\n`) };
}

/**
 * Opens the store; a failure to open (bad path, refused connection) names the store it tried, and a
 * store that does not exist is `not_found` unless `onCreate` is given.
 */
export async function openStore(target: StoreTarget, options: OpenStoreOptions = {}): Promise<EventStore> {
  try {
    try {
      return await openTarget(target, false);
    } catch (err) {
      if (!(err instanceof StoreNotFoundError) || options.onCreate === undefined) throw err;
      const store = await openTarget(target, true);
      options.onCreate(createdText(err));
      return store;
    }
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

/** `created a new store at PATH`, from the error that said there was none. */
function createdText(err: StoreNotFoundError): string {
  const { path, schema, database } = err.details as { path?: string; schema?: string; database?: string };
  return path !== undefined
    ? `created a new store at ${path}`
    : `created a new idem store in schema ${schema} of ${database}`;
}

/** Opens the store the target names; the remote server decides for itself, so `create` is local only. */
async function openTarget(target: StoreTarget, create: boolean): Promise<EventStore> {
  switch (target.kind) {
    case 'sqlite': {
      const open = await load<(o: { path: string; create: boolean }) => EventStore | Promise<EventStore>>(
        '../sqlite/index.js',
        'openSqliteStore',
        'the embedded SQLite store',
      );
      return await open({ path: target.path, create });
    }
    case 'postgres': {
      const open = await load<
        (o: { connectionString: string; create: boolean }) => EventStore | Promise<EventStore>
      >('../postgres/index.js', 'openPostgresStore', 'the PostgreSQL store');
      return await open({ connectionString: target.connectionString, create });
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
  options: OpenStoreOptions = {},
): Promise<T> {
  const target = storeTarget(flags, env);
  const store = await openStore(target, options);
  try {
    return await fn(store, target);
  } finally {
    await store.close();
  }
}
