// Child process of the http-append scenario: the idem server in its own process, as it is deployed,
// so that its work (and SQLite's fsync, which blocks its event loop) does not share an event loop
// with the client and its callers. One child serves every round of a store kind, each round on a
// new store, so that its code is as warm as a deployed server's. Run by `fork` (see
// scenarios/httpAppend.ts); not a public entry point.
//
// IPC, one command at a time: `open` (a SQLite path or a PostgreSQL connection string) opens a new
// store and starts the server on it, answered `ready` with the server's URL; `shut` closes that
// server and store, answered `shut`; `close` (or the parent going away) ends the process.
import type { EventStore } from '../core/eventStore.js';
import { openPostgresStore } from '../postgres/index.js';
import { startServer, type RunningServer } from '../server/index.js';
import { openSqliteStore } from '../sqlite/index.js';
import { runChild } from './childProcess.js';

/** What the parent tells the child. */
export type StoreServerCommand =
  { kind: 'open'; store: 'sqlite' | 'postgres'; where: string } | { kind: 'shut' } | { kind: 'close' };

/** What the child tells its parent. */
export type StoreServerMessage =
  { kind: 'ready'; url: string } | { kind: 'shut' } | { kind: 'error'; message: string };

function tell(m: StoreServerMessage): void {
  process.send?.(m);
}

async function open(kind: string, where: string): Promise<EventStore> {
  if (kind === 'sqlite') return openSqliteStore({ path: where, durability: 'full' });
  if (kind === 'postgres') return openPostgresStore({ connectionString: where });
  throw new Error(`storeServerChild: unknown store kind "${kind}"`);
}

async function main(): Promise<void> {
  let current: { store: EventStore; server: RunningServer } | null = null;
  const shut = async (): Promise<void> => {
    if (current === null) return;
    const { store, server } = current;
    current = null;
    await server.close();
    await store.close();
  };
  const commands: StoreServerCommand[] = [];
  let heard: (() => void) | null = null;
  let ended = false;
  process.on('message', (m: StoreServerCommand) => {
    commands.push(m);
    heard?.();
  });
  process.on('disconnect', () => {
    ended = true;
    heard?.();
  });
  for (;;) {
    while (commands.length === 0 && !ended) await new Promise<void>((resolve) => (heard = resolve));
    const command = commands.shift();
    if (command === undefined || command.kind === 'close') break;
    if (command.kind === 'open') {
      await shut();
      const store = await open(command.store, command.where);
      const server = await startServer({ store, port: 0 });
      current = { store, server };
      tell({ kind: 'ready', url: server.url });
    } else {
      await shut();
      tell({ kind: 'shut' });
    }
  }
  await shut();
}

runChild(main);
