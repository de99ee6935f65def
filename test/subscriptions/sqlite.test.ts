import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { tempDir } from '../support/tempDir.js';
import { describeSubscriptions } from './subscription.suite.js';

describeSubscriptions('sqlite', async () => {
  const dir = tempDir();
  const path = dir.file('events.db');
  try {
    const store = await openSqliteStore({ path });
    return {
      store,
      cleanup: async () => {
        await store.close();
        await dir.cleanup();
      },
      reopen: async () => {
        const other = await openSqliteStore({ path });
        return { store: other, cleanup: () => other.close() };
      },
    };
  } catch (err) {
    await dir.cleanup();
    throw err;
  }
});
