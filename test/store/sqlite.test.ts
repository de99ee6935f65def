import { openSqliteStore, type Durability } from '../../src/sqlite/sqliteStore.js';
import { variants } from '../support/fast.js';
import { tempDir } from '../support/tempDir.js';
import { describeEventStore } from './eventStore.suite.js';

// The inner loop (`npm run test:fast`) runs the default durability only.
for (const durability of variants(['full', 'normal'] as const satisfies readonly Durability[])) {
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
