// Child process of the http-append scenario: the idem server on a new store in its own process, as
// it is deployed, so that its work (and SQLite's fsync, which blocks its event loop) does not share
// an event loop with the client and its callers. Run by `fork` (see scenarios/httpAppend.ts); not a
// public entry point.
//
// Arguments: `sqlite <path>` or `postgres <connection string>`. IPC: the child says `ready` with the
// server's URL; on `close` it closes the server and the store and exits.
import type { EventStore } from '../core/eventStore.js';
import { openPostgresStore } from '../postgres/index.js';
import { startServer } from '../server/index.js';
import { openSqliteStore } from '../sqlite/index.js';
import { runChild } from './childProcess.js';

/** What the child tells its parent. */
export type StoreServerMessage = { kind: 'ready'; url: string } | { kind: 'error'; message: string };

function tell(m: StoreServerMessage): void {
  process.send?.(m);
}

async function open(kind: string, where: string): Promise<EventStore> {
  if (kind === 'sqlite') return openSqliteStore({ path: where, durability: 'full' });
  if (kind === 'postgres') return openPostgresStore({ connectionString: where });
  throw new Error(`storeServerChild: unknown store kind "${kind}"`);
}

async function main(kind: string, where: string): Promise<void> {
  const store = await open(kind, where);
  const server = await startServer({ store, port: 0 });
  const closed = new Promise<void>((resolve) => {
    process.on('message', (m: { kind: string }) => {
      if (m.kind === 'close') resolve();
    });
    process.on('disconnect', () => resolve());
  });
  tell({ kind: 'ready', url: server.url });
  await closed;
  await server.close();
  await store.close();
}

const [kind, where] = process.argv.slice(2);
runChild(() => main(kind!, where!));
