// Small helpers for the PostgreSQL store's tests: one temporary database per test file, a fresh
// schema (a fresh, empty store) per test.
import { after } from 'node:test';
import pg from 'pg';
import {
  openPostgresStore,
  type PostgresEventStore,
  type PostgresStoreOptions,
} from '../../src/postgres/index.js';
import { randomIdentifier } from '../support/names.js';
import { createTempDatabase, type TempDatabase } from '../support/postgres.js';
import { requireOrSkip } from '../support/services.js';

export interface PostgresTestContext {
  /** A skip reason when PostgreSQL is unreachable (and not required), else false. */
  skip: string | false;
  /** This file's temporary database; only usable when `skip` is false. */
  db: TempDatabase;
  /** Opens a store (with its own pool) on a new random schema of the file's database. */
  openStore(options?: Omit<PostgresStoreOptions, 'connectionString' | 'pool'>): Promise<PostgresEventStore>;
  /** The same on the file's shared pool (opens faster; the pool outlives the store). */
  openSharedStore(
    options?: Omit<PostgresStoreOptions, 'connectionString' | 'pool'>,
  ): Promise<PostgresEventStore>;
}

/**
 * Call once at the top level of a test file: checks PostgreSQL (skip or fail per
 * IDEM_REQUIRE_SERVICES), creates the file's temporary database and drops it after the file's tests.
 */
export async function pgTestContext(): Promise<PostgresTestContext> {
  const skip = await requireOrSkip('postgres');
  if (skip) {
    const unavailable = (): never => {
      throw new Error(skip);
    };
    const db = { name: '', connectionString: '', drop: () => Promise.resolve() };
    return { skip, db, openStore: unavailable, openSharedStore: unavailable };
  }
  const db = await createTempDatabase('idem_pg');
  let pool: pg.Pool | undefined;
  after(async () => {
    await pool?.end();
    await db.drop();
  });
  return {
    skip,
    db,
    openStore: (options = {}) =>
      openPostgresStore({ connectionString: db.connectionString, schema: randomIdentifier('s'), ...options }),
    openSharedStore: (options = {}) => {
      pool ??= new pg.Pool({ connectionString: db.connectionString, max: 8 });
      return openPostgresStore({ pool, schema: randomIdentifier('s'), ...options });
    },
  };
}
