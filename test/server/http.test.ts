// The HTTP API suite, in-process (fastify inject) and over a real port (fetch), on a SQLite store.
import { createServer } from '../../src/server/createServer.js';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { variants } from '../support/fast.js';
import { tempDir } from '../support/tempDir.js';
import { describeHttpApi, type MakeHttpTarget } from './httpApi.suite.js';
import { fetchRequester, injectRequester } from './requester.js';
import { startTestServer } from './serverFixture.js';

// The inner loop (`npm run test:fast`) runs it over the real port only.
const targets: [string, MakeHttpTarget][] = [
  [
    'over a real port (fetch)',
    async () => {
      const f = await startTestServer({
        storeLimits: { maxEventBytes: 10_000 },
        limits: { maxBodyBytes: 100_000 },
      });
      return { request: fetchRequester(f.url), store: f.store, cleanup: () => f.cleanup() };
    },
  ],
  [
    'in-process (inject)',
    async () => {
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
    },
  ],
];
for (const [name, make] of variants(targets)) describeHttpApi(name, make);
