/** One contract, run on a new memory, SQLite and PostgreSQL store each (PostgreSQL skips with its reason). */
import { describe, it } from 'node:test';
import { createMemoryStore, type MemoryEventStore } from '../../src/memory/memoryStore.js';
import type { PostgresEventStore } from '../../src/postgres/postgresStore.js';
import { openSqliteStore, type SqliteEventStore } from '../../src/sqlite/sqliteStore.js';
import type { PostgresTestContext } from '../postgres/pgFixtures.js';
import { tempDir } from './tempDir.js';

/** A store of each kind. */
export type AnyStore = MemoryEventStore | SqliteEventStore | PostgresEventStore;

/** `contract` under `title`, once per kind of store, each on a new store closed after it. */
export function onEveryStore(
  pg: PostgresTestContext,
  title: string,
  contract: (store: AnyStore) => Promise<void>,
): void {
  describe(title, () => {
    it('memory', async () => {
      const store = createMemoryStore();
      try {
        await contract(store);
      } finally {
        await store.close();
      }
    });

    it('SQLite', async () => {
      const dir = tempDir();
      const store = await openSqliteStore({ path: dir.file('events.db') });
      try {
        await contract(store);
      } finally {
        await store.close();
        await dir.cleanup();
      }
    });

    it('PostgreSQL', { skip: pg.skip }, async () => {
      const store = await pg.openSharedStore();
      try {
        await contract(store);
      } finally {
        await store.close();
      }
    });
  });
}
