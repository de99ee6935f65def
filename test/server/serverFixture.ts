/** A real server on an ephemeral loopback port over a fresh SQLite store, for one test. */
import type { StoreLimits } from '../../src/core/limits.js';
import type { ServerLimits } from '../../src/server/context.js';
import { startServer, type RunningServer } from '../../src/server/startServer.js';
import type { TokenConfig } from '../../src/server/tokens.js';
import { openSqliteStore, type SqliteEventStore } from '../../src/sqlite/sqliteStore.js';
import type { EncryptOptions } from '../../src/core/encryption.js';
import { tempDir } from '../support/tempDir.js';

export interface ServerFixture {
  server: RunningServer;
  store: SqliteEventStore;
  url: string;
  cleanup(): Promise<void>;
}

export interface ServerFixtureOptions {
  storeLimits?: Partial<StoreLimits>;
  /** The store's `encrypt` option (crypto-shredding). */
  encrypt?: EncryptOptions;
  limits?: Partial<ServerLimits>;
  tokens?: TokenConfig[];
  heartbeatMs?: number;
  silenceMs?: number;
  allowedOrigins?: string[];
}

export async function startTestServer(options: ServerFixtureOptions = {}): Promise<ServerFixture> {
  const dir = tempDir();
  let store: SqliteEventStore | undefined;
  try {
    store = await openSqliteStore({
      path: dir.file('events.db'),
      durability: 'normal',
      ...(options.storeLimits ? { limits: options.storeLimits } : {}),
      ...(options.encrypt ? { encrypt: options.encrypt } : {}),
    });
    const server = await startServer({
      store,
      port: 0,
      closeStore: true,
      ...(options.limits ? { limits: options.limits } : {}),
      ...(options.tokens ? { tokens: options.tokens } : {}),
      ...(options.heartbeatMs ? { heartbeatMs: options.heartbeatMs } : {}),
      ...(options.silenceMs ? { silenceMs: options.silenceMs } : {}),
      ...(options.allowedOrigins ? { allowedOrigins: options.allowedOrigins } : {}),
    });
    const s = store;
    return {
      server,
      store: s,
      url: server.url,
      cleanup: async () => {
        try {
          await server.close();
        } finally {
          await s.close();
          await dir.cleanup();
        }
      },
    };
  } catch (err) {
    await store?.close();
    await dir.cleanup();
    throw err;
  }
}

/** Runs `fn` with a server started for it, and cleans up after it. */
export async function withServer(
  options: ServerFixtureOptions,
  fn: (f: ServerFixture) => Promise<void>,
): Promise<void> {
  const f = await startTestServer(options);
  try {
    await fn(f);
  } finally {
    await f.cleanup();
  }
}
