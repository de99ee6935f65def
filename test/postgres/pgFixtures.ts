// Small helpers for the PostgreSQL store's tests: one temporary database per test file, a fresh
// schema (a fresh, empty store) per test.
import { after } from 'node:test';
import { openPostgresStore, type PostgresEventStore, type PostgresStoreOptions } from '../../src/postgres/index.js';
import { randomIdentifier } from '../support/names.js';
import { createTempDatabase, type TempDatabase } from '../support/postgres.js';
import { requireOrSkip } from '../support/services.js';

export interface PgTestContext {
  /** A skip reason when PostgreSQL is unreachable (and not required), else false. */
  skip: string | false;
  /** This file's temporary database; only usable when `skip` is false. */
  db: TempDatabase;
  /** Opens a store on a new random schema of the file's database. */
  openStore(options?: Omit<PostgresStoreOptions, 'connectionString' | 'pool'>): Promise<PostgresEventStore>;
}

/**
 * Call once at the top level of a test file: checks PostgreSQL (skip or fail per
 * IDEM_REQUIRE_SERVICES), creates the file's temporary database and drops it after the file's tests.
 */
export async function pgTestContext(): Promise<PgTestContext> {
  const skip = await requireOrSkip('postgres');
  if (skip) {
    const unavailable = (): never => {
      throw new Error(skip);
    };
    return { skip, db: { name: '', connectionString: '', drop: () => Promise.resolve() }, openStore: unavailable };
  }
  const db = await createTempDatabase('idem_pg');
  after(() => db.drop());
  return {
    skip,
    db,
    openStore: (options = {}) =>
      openPostgresStore({ connectionString: db.connectionString, schema: randomIdentifier('s'), ...options }),
  };
}
