import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import type { ConsumerTarget } from '../core/consumerTarget.js';
import { IdemError } from '../core/errors.js';
import { UsageError } from './usageError.js';
import type { Pool as PgPool } from 'pg';

/** The options of verbs that work on a consumer target (effects, versions, ledger). */
export interface TargetFlags {
  targetDb?: string;
  targetPostgres?: string;
  targetSchema?: string;
}

/** Adds `--target-db`, `--target-postgres` and `--target-schema`. */
export function withTargetOptions(cmd: Command): Command {
  return cmd
    .option('--target-db <path>', "the consumers' SQLite target file (only consumer rebuild creates one)")
    .option('--target-postgres <url>', "the consumers' PostgreSQL target (or env IDEM_TARGET_POSTGRES_URL)")
    .option('--target-schema <schema>', 'schema of the PostgreSQL target tables (default: idem)');
}

/** A target the flags name that holds no idem target tables: the verb creates nothing. */
function noTarget(message: string, details: Record<string, unknown>): IdemError {
  return new IdemError('not_found', message, { what: 'target', ...details });
}

/**
 * Opens the target the flags name, runs `fn`, and closes what it opened. A target without idem's
 * tables is `not_found` (the verb creates no file, table or schema) unless `create` is set: only
 * `consumer rebuild` writes into a new target (`withNewOrExistingTarget`).
 */
export async function withTarget<T>(
  flags: TargetFlags,
  env: NodeJS.ProcessEnv,
  fn: (target: ConsumerTarget<unknown>) => Promise<T>,
  { create = false }: { create?: boolean } = {},
): Promise<T> {
  const pgUrl =
    flags.targetPostgres ?? (flags.targetDb === undefined ? env.IDEM_TARGET_POSTGRES_URL : undefined);
  if (flags.targetDb !== undefined && flags.targetPostgres !== undefined)
    throw new UsageError('choose one of --target-db and --target-postgres');
  if (flags.targetDb === undefined && (pgUrl === undefined || pgUrl === '')) {
    throw new UsageError('name the consumer target with --target-db PATH or --target-postgres URL');
  }
  if (flags.targetDb !== undefined) {
    const path = resolve(flags.targetDb);
    if (!create && !existsSync(path)) throw noTarget(`no target at ${path}`, { path });
    const { sqliteTarget } = await import('../sqlite/target.js');
    const { schemaVersion } = await import('../sqlite/migrations.js');
    const { TARGET_SCHEMA_TABLE } = await import('../sqlite/targetMigrations.js');
    const target = sqliteTarget(path);
    try {
      if (!create && schemaVersion(target.db, TARGET_SCHEMA_TABLE) === 0)
        throw noTarget(`no idem target in ${path}`, { path });
      return await fn(target);
    } finally {
      await target.close();
    }
  }
  let Pool: typeof PgPool;
  try {
    Pool = (await import('pg')).default.Pool;
  } catch (err) {
    throw new IdemError(
      'unavailable',
      'the PostgreSQL target needs the pg package; install it with `npm install pg`',
      {},
      { cause: err },
    );
  }
  const { postgresTarget } = await import('../postgres/target.js');
  const pool = new Pool({ connectionString: pgUrl, max: 2 });
  // postgresTarget listens for the errors of idle connections (guardPool): a long rebuild survives them.
  try {
    const target = postgresTarget(
      pool,
      flags.targetSchema === undefined ? {} : { schema: flags.targetSchema },
    );
    if (!create) await requirePgTarget(pool, target.schema);
    return await fn(target);
  } finally {
    await pool.end();
  }
}

/** `withTarget` that creates the target's tables (and SQLite file) when they do not exist. */
export function withNewOrExistingTarget<T>(
  flags: TargetFlags,
  env: NodeJS.ProcessEnv,
  fn: (target: ConsumerTarget<unknown>) => Promise<T>,
): Promise<T> {
  return withTarget(flags, env, fn, { create: true });
}

/** Refuses a PostgreSQL schema without the target's tables (its migrations ledger). */
async function requirePgTarget(pool: PgPool, schema: string): Promise<void> {
  const r = await pool.query<{ found: boolean; db: string }>(
    'SELECT to_regclass($1) IS NOT NULL AS found, current_database() AS db',
    [`"${schema}".target_migrations`],
  );
  const row = r.rows[0];
  if (row?.found) return;
  const database = row?.db ?? '?';
  throw noTarget(`no idem target in schema ${schema} of ${database}`, { schema, database });
}
