// A server process for the fault scenarios: `node --import tsx serverChild.ts '<json config>'`.
// Prints `listening <url>` once it accepts requests. The parent SIGKILLs it.
import { writeSync } from 'node:fs';
import type { EventStore } from '../../src/core/eventStore.js';
import { openPostgresStore } from '../../src/postgres/postgresStore.js';
import type { ServerLimits } from '../../src/server/context.js';
import { startServer } from '../../src/server/startServer.js';
import { parseTokens } from '../../src/server/tokens.js';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';

export interface ServerChildConfig {
  store: { kind: 'sqlite'; path: string; durability?: 'full' | 'normal' } | { kind: 'postgres'; url: string };
  /** 0 picks a free port. */
  port: number;
  /** Tokens in the `IDEM_TOKENS` form; none: no tokens (loopback only). */
  tokens?: string;
  limits?: Partial<ServerLimits>;
}

const config = JSON.parse(process.argv[2] ?? '{}') as ServerChildConfig;
const store: EventStore =
  config.store.kind === 'sqlite'
    ? await openSqliteStore({ path: config.store.path, durability: config.store.durability ?? 'full' })
    : await openPostgresStore({ connectionString: config.store.url, poolSize: 8 });
const server = await startServer({
  store,
  port: config.port,
  logger: false,
  closeStore: true,
  ...(config.tokens === undefined ? {} : { tokens: parseTokens(config.tokens, 'IDEM_TOKENS') }),
  ...(config.limits === undefined ? {} : { limits: config.limits }),
});
writeSync(1, `listening ${server.url}\n`);
process.on('SIGTERM', () => {
  void server.close().then(() => process.exit(0));
});
