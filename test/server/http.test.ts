// The HTTP API suite, in-process (fastify inject) and over a real port (fetch), on a SQLite store.
import { createServer } from '../../src/server/createServer.js';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { tempDir } from '../support/tempDir.js';
import { describeHttpApi } from './httpApi.suite.js';
import { fetchRequester, injectRequester } from './requester.js';
import { startTestServer } from './serverFixture.js';

describeHttpApi('in-process (inject)', async () => {
  const dir = tempDir();
  const store = await openSqliteStore({ path: dir.file('events.db'), limits: { maxEventBytes: 10_000 } });
  const server = await createServer({ store, limits: { maxBodyBytes: 100_000 } });
  return {
    request: injectRequester(server.app),
    store,
    cleanup: async () => {
      await server.close();
      await store.close();
      await dir.cleanup();
    },
  };
});

describeHttpApi('over a real port (fetch)', async () => {
  const f = await startTestServer({
    storeLimits: { maxEventBytes: 10_000 },
    limits: { maxBodyBytes: 100_000 },
  });
  return { request: fetchRequester(f.url), store: f.store, cleanup: () => f.cleanup() };
});
