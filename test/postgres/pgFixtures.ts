// Small helpers for the PostgreSQL store's tests: one temporary database per test file, a fresh
// schema (a fresh, empty store) per test.
import { after } from 'node:test';
import pg from 'pg';
import {
  openPostgresStore,
  type PostgresEventStore,
  type PostgresStoreOptions,
} from '../../src/postgres/index.js';
import { runPgMigrations } from '../../src/postgres/migrations.js';
import { STORE_MIGRATIONS } from '../../src/postgres/postgresStore.js';
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
  /**
   * The same on the file's shared pool (opens faster; the pool outlives the store). Without a
   * `schema` or `create` option the schema is one migrated in the background while the previous
   * test ran (by the migrations `openPostgresStore` runs), so a test does not wait for its schema's
   * DDL; it is still new, empty and used by no other store.
   */
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
  /** The next fresh schema, being migrated (resolves to its name, or to null if that failed). */
  let next: Promise<string | null> | undefined;
  const prepare = (shared: pg.Pool): Promise<string | null> => {
    const schema = randomIdentifier('s');
    return runPgMigrations({ pool: shared, schema }, STORE_MIGRATIONS).then(
      () => schema,
      // The test then migrates a schema itself, and meets the error there if it lasts.
      () => null,
    );
  };
  after(async () => {
    await next;
    await pool?.end();
    await db.drop();
  });
  return {
    skip,
    db,
    openStore: (options = {}) =>
      openPostgresStore({ connectionString: db.connectionString, schema: randomIdentifier('s'), ...options }),
    openSharedStore: async (options = {}) => {
      const shared = (pool ??= new pg.Pool({ connectionString: db.connectionString, max: 8 }));
      if ('schema' in options || 'create' in options)
        return openPostgresStore({ pool: shared, schema: randomIdentifier('s'), ...options });
      const ready = await (next ?? prepare(shared));
      next = prepare(shared);
      return openPostgresStore({ pool: shared, schema: ready ?? randomIdentifier('s'), ...options });
    },
  };
}
