// A store (SQLite, the source) plus a target of either kind with a few SQL helpers for projections.
import type Database from 'better-sqlite3';
import pg from 'pg';
import type { ConsumerTarget } from '../../../src/core/consumerTarget.js';
import type { EventStore } from '../../../src/core/eventStore.js';
import { postgresTarget } from '../../../src/postgres/target.js';
import { openSqliteStore } from '../../../src/sqlite/index.js';
import { sqliteTarget } from '../../../src/sqlite/target.js';
import { randomIdentifier } from '../../support/names.js';
import { createTempDatabase, type TempDatabase } from '../../support/postgres.js';
import { tempDir } from '../../support/tempDir.js';

export type AnyTx = Database.Database | pg.PoolClient;

export interface EffectsFixture {
  kind: 'sqlite' | 'postgres';
  store: EventStore;
  target: ConsumerTarget<AnyTx>;
  /** Another target object on the same database (another process's connection). */
  another(): ConsumerTarget<AnyTx>;
  /** How a child process opens the same target. */
  childTarget:
    { kind: 'sqlite'; path: string } | { kind: 'postgres'; connectionString: string; schema: string };
  /** In a handler: records the event in table `name` (created on first use), inside the transaction. */
  project(tx: AnyTx, table: string, stream: string, eventId: string): Promise<void>;
  rowCount(table: string): Promise<number>;
  cleanup(): Promise<void>;
}

export type MakeFixture = () => Promise<EffectsFixture>;

export async function makeSqliteFixture(): Promise<EffectsFixture> {
  const dir = tempDir();
  const store = await openSqliteStore({ path: dir.file('store.db') });
  const path = dir.file('target.db');
  const target = sqliteTarget(path);
  const others: ConsumerTarget<AnyTx>[] = [];
  return {
    kind: 'sqlite',
    store,
    target: target,
    another: () => {
      const t = sqliteTarget(path) as ConsumerTarget<AnyTx>;
      others.push(t);
      return t;
    },
    childTarget: { kind: 'sqlite', path },
    project: (tx, table, stream, eventId) => {
      const db = tx as Database.Database;
      db.prepare(
        `CREATE TABLE IF NOT EXISTS ${table} (event_id TEXT PRIMARY KEY, stream TEXT NOT NULL)`,
      ).run();
      db.prepare(`INSERT INTO ${table} (event_id, stream) VALUES (?, ?)`).run(eventId, stream);
      return Promise.resolve();
    },
    rowCount: (table) =>
      Promise.resolve((target.db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n),
    cleanup: async () => {
      for (const t of others) await t.close();
      await target.close();
      await store.close();
      await dir.cleanup();
    },
  };
}

/** PostgreSQL fixtures share one temporary database per file; each gets its own schema. */
export function postgresFixtures(): { make: MakeFixture; close(): Promise<void> } {
  let shared: Promise<{ db: TempDatabase; pool: pg.Pool }> | null = null;
  const pools: pg.Pool[] = [];
  const make: MakeFixture = async () => {
    shared ??= createTempDatabase('idem_effects').then((db) => ({
      db,
      pool: new pg.Pool({ connectionString: db.connectionString, max: 8 }),
    }));
    const { db, pool } = await shared;
    const dir = tempDir();
    const store = await openSqliteStore({ path: dir.file('store.db') });
    const schema = randomIdentifier('fx');
    const target = postgresTarget(pool, { schema }) as ConsumerTarget<AnyTx>;
    return {
      kind: 'postgres',
      store,
      target,
      another: () => {
        const p = new pg.Pool({ connectionString: db.connectionString, max: 4 });
        pools.push(p);
        return postgresTarget(p, { schema });
      },
      childTarget: { kind: 'postgres', connectionString: db.connectionString, schema },
      project: async (tx, table, stream, eventId) => {
        const c = tx as pg.PoolClient;
        await c.query(
          `CREATE TABLE IF NOT EXISTS ${schema}.${table} (event_id text PRIMARY KEY, stream text NOT NULL)`,
        );
        await c.query(`INSERT INTO ${schema}.${table} (event_id, stream) VALUES ($1, $2)`, [eventId, stream]);
      },
      rowCount: async (table) =>
        (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.${table}`)).rows[0]!.n,
      cleanup: async () => {
        await target.close();
        await store.close();
        await dir.cleanup();
      },
    };
  };
  return {
    make,
    close: async () => {
      for (const p of pools.splice(0)) await p.end();
      if (!shared) return;
      const { db, pool } = await shared;
      await pool.end();
      await db.drop();
    },
  };
}
