// Child process of the idle-subscriptions scenario: appends at full speed to the scenario's store
// from a process of its own, so that the idle subscriptions' process does nothing but hold them and
// its CPU is theirs. Run by `fork` (see scenarios/idleSubscriptions.ts); not a public entry point.
//
// Arguments: `sqlite <path>` or `postgres <connection string>`. IPC: the child opens the store and
// says `ready`; on `go` it appends for `ms` from event `from` and says `done` with what it appended;
// on `close` (or when the parent goes) it closes the store and exits.
import type { EventStore } from '../core/eventStore.js';
import { openPostgresStore } from '../postgres/index.js';
import { openSqliteStore } from '../sqlite/index.js';
import { appendFor, type Appended } from './scenarios/idleSubscriptions.js';
import { runChild } from './childProcess.js';

export type AppenderMessage =
  { kind: 'ready' } | ({ kind: 'done' } & Appended) | { kind: 'error'; message: string };

export type AppenderCommand = { kind: 'go'; ms: number; from: number } | { kind: 'close' };

function tell(m: AppenderMessage): void {
  process.send?.(m);
}

async function open(kind: string, where: string): Promise<EventStore> {
  if (kind === 'sqlite') return openSqliteStore({ path: where });
  if (kind === 'postgres') return openPostgresStore({ connectionString: where });
  throw new Error(`appenderChild: unknown store kind "${kind}"`);
}

async function main(kind: string, where: string): Promise<void> {
  const store = await open(kind, where);
  const closed = new Promise<void>((resolve, reject) => {
    process.on('message', (m: AppenderCommand) => {
      if (m.kind === 'close') resolve();
      else appendFor(store, m.ms, m.from).then((done) => tell({ kind: 'done', ...done }), reject);
    });
    process.on('disconnect', () => resolve());
  });
  tell({ kind: 'ready' });
  try {
    await closed;
  } finally {
    await store.close();
  }
}

const [kind, where] = process.argv.slice(2);
runChild(() => main(kind!, where!));
