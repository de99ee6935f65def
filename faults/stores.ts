/** Where a scenario keeps its events: a SQLite file in its directory, or a fresh PostgreSQL database. */
import { join } from 'node:path';
import pg from 'pg';
import type { EventStore } from '../src/core/eventStore.js';
import type { RecordedEvent } from '../src/core/event.js';
import type { EventFilter } from '../src/core/filter.js';
import { openPostgresStore } from '../src/postgres/postgresStore.js';
import { openSqliteStore } from '../src/sqlite/sqliteStore.js';
import { createTempDatabase } from '../test/support/postgres.js';
import type { ConsumerChildConfig } from './children/consumerChild.js';
import { countOutput, readPostgresOutput, readSqliteOutput, type OutputCounts } from './output.js';
import Database from 'better-sqlite3';

export type Backend = 'sqlite' | 'postgres';

export interface Setup {
  backend: Backend;
  /** The parent's own store handle (appends, reads, admin). */
  store: EventStore;
  /** Child config parts pointing at the same store and target. */
  storeConfig: ConsumerChildConfig['store'];
  targetConfig: ConsumerChildConfig['target'];
  /** Lost, doubled and out-of-order of `consumer`'s output against the store's events matching `filter`. */
  count(consumer: string, filter: EventFilter): Promise<OutputCounts>;
  close(): Promise<void>;
}

export async function readEvents(store: EventStore, filter?: EventFilter): Promise<RecordedEvent[]> {
  const out: RecordedEvent[] = [];
  for await (const e of store.readAll(filter ? { filter } : {})) out.push(e);
  return out;
}

export async function openSetup(backend: Backend, dir: string): Promise<Setup> {
  if (backend === 'sqlite') {
    const storePath = join(dir, 'store.db');
    const targetPath = join(dir, 'target.db');
    const store = await openSqliteStore({ path: storePath, durability: 'normal' });
    return {
      backend,
      store,
      storeConfig: { kind: 'sqlite', path: storePath },
      targetConfig: { kind: 'sqlite', path: targetPath },
      count: async (consumer, filter) => {
        const db = new Database(targetPath, { readonly: true });
        try {
          const out = readSqliteOutput(db, consumer);
          return countOutput(await readEvents(store, filter), out.applied, out.entities);
        } finally {
          db.close();
        }
      },
      close: () => store.close(),
    };
  }
  const database = await createTempDatabase('idem_faults');
  try {
    const store = await openPostgresStore({ connectionString: database.connectionString, poolSize: 4 });
    return {
      backend,
      store,
      storeConfig: { kind: 'postgres', url: database.connectionString },
      targetConfig: { kind: 'postgres', url: database.connectionString },
      count: async (consumer, filter) => {
        const pool = new pg.Pool({ connectionString: database.connectionString, max: 1 });
        try {
          const out = await readPostgresOutput(pool, consumer);
          return countOutput(await readEvents(store, filter), out.applied, out.entities);
        } finally {
          await pool.end();
        }
      },
      close: async () => {
        await store.close();
        await database.drop();
      },
    };
  } catch (err) {
    await database.drop();
    throw err;
  }
}
