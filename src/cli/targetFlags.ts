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
    .option('--target-db <path>', "the consumers' SQLite target file")
    .option('--target-postgres <url>', "the consumers' PostgreSQL target (or env IDEM_TARGET_POSTGRES_URL)")
    .option('--target-schema <schema>', 'schema of the PostgreSQL target tables (default: idem)');
}

/** Opens the target the flags name, runs `fn`, and closes what it opened. */
export async function withTarget<T>(
  flags: TargetFlags,
  env: NodeJS.ProcessEnv,
  fn: (target: ConsumerTarget<unknown>) => Promise<T>,
): Promise<T> {
  const pgUrl =
    flags.targetPostgres ?? (flags.targetDb === undefined ? env.IDEM_TARGET_POSTGRES_URL : undefined);
  if (flags.targetDb !== undefined && flags.targetPostgres !== undefined)
    throw new UsageError('choose one of --target-db and --target-postgres');
  if (flags.targetDb === undefined && (pgUrl === undefined || pgUrl === '')) {
    throw new UsageError('name the consumer target with --target-db PATH or --target-postgres URL');
  }
  if (flags.targetDb !== undefined) {
    const { sqliteTarget } = await import('../sqlite/target.js');
    const target = sqliteTarget(resolve(flags.targetDb));
    try {
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
    return await fn(target);
  } finally {
    await pool.end();
  }
}
