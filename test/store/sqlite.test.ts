import { openSqliteStore, type Durability } from '../../src/sqlite/sqliteStore.js';
import { tempDir } from '../support/tempDir.js';
import { describeEventStore } from './eventStore.suite.js';

for (const durability of ['full', 'normal'] as const satisfies readonly Durability[]) {
  describeEventStore(`sqlite (durability ${durability})`, async ({ limits, upcasters } = {}) => {
    const dir = tempDir();
    try {
      const store = await openSqliteStore({
        path: dir.file('events.db'),
        durability,
        ...(limits ? { limits } : {}),
        ...(upcasters ? { upcasters } : {}),
      });
      return {
        store,
        cleanup: async () => {
          await store.close();
          await dir.cleanup();
        },
      };
    } catch (err) {
      await dir.cleanup();
      throw err;
    }
  });
}
