import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { tempDir } from '../support/tempDir.js';
import { describeEncryption } from './encryption.suite.js';

describeEncryption('sqlite', async (encrypt) => {
  const dir = tempDir();
  try {
    const store = await openSqliteStore({ path: dir.file('events.db'), encrypt });
    return {
      store,
      storedData: (id) =>
        Promise.resolve(
          store.db.prepare('SELECT data FROM idem_events WHERE id = ?').pluck().get(id) as string,
        ),
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
