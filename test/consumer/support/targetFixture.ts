import type Database from 'better-sqlite3';
import pg from 'pg';
import type { ConsumerTarget } from '../../../src/core/consumerTarget.js';
import { postgresTarget } from '../../../src/postgres/target.js';
import { migrateTarget } from '../../../src/postgres/targetMigrations.js';
import { sqliteTarget } from '../../../src/sqlite/target.js';
import { randomIdentifier } from '../../support/names.js';
import { createTempDatabase, type TempDatabase } from '../../support/postgres.js';
import { tempDir } from '../../support/tempDir.js';

/**
 * A consumer target plus the little SQL a test handler needs on it: one output table of per-stream
 * totals, written through `ctx.tx` so that it commits with the ledger.
 */
export interface TargetFixture<Tx> {
  kind: 'sqlite' | 'postgres';
  target: ConsumerTarget<Tx>;
  /** Creates an output table `name (stream primary key, total, events)`. */
  createTable(name: string): Promise<void>;
  /** Adds `amount` to the stream's total in `table` inside the handler's transaction. */
  add(tx: Tx, table: string, stream: string, amount: number): Promise<void>;
  /** Runs a statement that fails in the database (a NOT NULL violation on `table`). */
  badSql(tx: Tx, table: string): Promise<void>;
  /** Total and event count per stream. */
  totals(table: string): Promise<Map<string, { total: number; events: number }>>;
  /** A second target on the same database (another process's view), for identity and fencing tests. */
  another(): Promise<ConsumerTarget<Tx>>;
  cleanup(): Promise<void>;
}

export interface TargetFixtureOptions {
  /**
   * A target whose schema no migration has touched yet (for the tests of migrating itself). Without
   * it a fixture may come with its tables already made: new, empty and used by nothing else.
   */
  fresh?: boolean;
}

export type MakeTargetFixture<Tx> = (options?: TargetFixtureOptions) => Promise<TargetFixture<Tx>>;

export const makeSqliteFixture: MakeTargetFixture<Database.Database> = () => {
  const dir = tempDir();
  const target = sqliteTarget(dir.file('target.db'));
  const others: ConsumerTarget<Database.Database>[] = [];
  const stmts = new Map<string, Database.Statement>();
  return Promise.resolve({
    kind: 'sqlite',
    target,
    createTable: (name) => {
      target.db.exec(
        `CREATE TABLE ${name} (stream TEXT PRIMARY KEY, total REAL NOT NULL, events INTEGER NOT NULL)`,
      );
      return Promise.resolve();
    },
    add: (tx, table, stream, amount) => {
      let s = stmts.get(table);
      if (!s) {
        s = tx.prepare(
          `INSERT INTO ${table} (stream, total, events) VALUES (?, ?, 1)
           ON CONFLICT (stream) DO UPDATE SET total = total + excluded.total, events = events + 1`,
        );
        stmts.set(table, s);
      }
      s.run(stream, amount);
      return Promise.resolve();
    },
    badSql: (tx, table) => {
      tx.prepare(`INSERT INTO ${table} (stream, total, events) VALUES ('bad', NULL, 1)`).run();
      return Promise.resolve();
    },
    totals: (table) => {
      const rows = target.db.prepare(`SELECT stream, total, events FROM ${table}`).all() as {
        stream: string;
        total: number;
        events: number;
      }[];
      return Promise.resolve(new Map(rows.map((r) => [r.stream, { total: r.total, events: r.events }])));
    },
    another: () => {
      const t = sqliteTarget(dir.file('target.db'));
      others.push(t);
      return Promise.resolve(t);
    },
    cleanup: async () => {
      for (const t of others) await t.close();
      await target.close();
      await dir.cleanup();
    },
  });
};

/**
 * PostgreSQL fixtures that share one temporary database (created on first use): each fixture gets its
 * own schema for the target's tables and the output table, dropped at its cleanup. Unless `fresh`,
 * that schema is one migrated in the background while the previous test ran, so that a test does not
 * wait for its schema's DDL. Call `close()` once at the end (it drops the database).
 */
export function postgresFixtures(): {
  make: MakeTargetFixture<pg.PoolClient>;
  /** The shared database's connection string, for a test that opens its own pools on a schema of its own. */
  connectionString(): Promise<string>;
  close(): Promise<void>;
} {
  let shared: Promise<{ db: TempDatabase; pool: pg.Pool }> | null = null;
  const open = (): Promise<{ db: TempDatabase; pool: pg.Pool }> =>
    (shared ??= createTempDatabase('idem_consumer').then((db) => ({
      db,
      pool: new pg.Pool({ connectionString: db.connectionString, max: 8 }),
    })));
  /** The next schema, being migrated (resolves to its name, or to null if that failed). */
  let next: Promise<string | null> | null = null;
  const prepare = (pool: pg.Pool): Promise<string | null> => {
    const schema = randomIdentifier('t');
    // The test then makes a schema itself, and meets the error there if it lasts.
    return migrateTarget(pool, schema).then(
      () => schema,
      () => null,
    );
  };
  const make: MakeTargetFixture<pg.PoolClient> = async (options = {}) => {
    const { pool } = await open();
    let schema = options.fresh === true ? null : await (next ?? prepare(pool));
    next = prepare(pool);
    if (schema === null) {
      schema = randomIdentifier('t');
      await pool.query(`CREATE SCHEMA ${schema}`);
    }
    const target = postgresTarget(pool, { schema });
    const others: pg.Pool[] = [];
    return {
      kind: 'postgres',
      target,
      createTable: async (name) => {
        await pool.query(
          `CREATE TABLE ${schema}.${name} (stream text PRIMARY KEY, total double precision NOT NULL, events integer NOT NULL)`,
        );
      },
      add: async (tx, table, stream, amount) => {
        await tx.query({
          name: `add_${schema}_${table}`,
          text: `INSERT INTO ${schema}.${table} AS t (stream, total, events) VALUES ($1, $2, 1)
                 ON CONFLICT (stream) DO UPDATE SET total = t.total + excluded.total, events = t.events + 1`,
          values: [stream, amount],
        });
      },
      badSql: async (tx, table) => {
        await tx.query(`INSERT INTO ${schema}.${table} (stream, total, events) VALUES ('bad', NULL, 1)`);
      },
      totals: async (table) => {
        const r = await pool.query<{ stream: string; total: number; events: number }>(
          `SELECT stream, total, events FROM ${schema}.${table}`,
        );
        return new Map(r.rows.map((row) => [row.stream, { total: row.total, events: row.events }]));
      },
      another: () => {
        // Its own pool: another process's connections.
        const other = new pg.Pool({ connectionString: pool.options.connectionString, max: 2 });
        others.push(other);
        return Promise.resolve(postgresTarget(other, { schema }));
      },
      cleanup: async () => {
        await target.close();
        for (const o of others) await o.end();
        if (process.env.IDEM_KEEP_TEST_DATA !== '1') await pool.query(`DROP SCHEMA ${schema} CASCADE`);
      },
    };
  };
  return {
    make,
    connectionString: async () => (await open()).db.connectionString,
    close: async () => {
      if (!shared) return;
      const { db, pool } = await shared;
      const left = await next;
      if (left !== null) await pool.query(`DROP SCHEMA ${left} CASCADE`);
      await pool.end();
      await db.drop();
    },
  };
}
