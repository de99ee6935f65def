// Helpers shared by the effect suites: appends, and dispatchers in child processes.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { EventStore } from '../../../src/core/eventStore.js';

const CHILD = fileURLToPath(new URL('./dispatcherChild.ts', import.meta.url));

/** A dispatcher in a child process (see support/dispatcherChild.ts). */
export function spawnDispatcher(config: {
  target: unknown;
  mailUrl: string;
  leaseMs: number;
  hang: boolean;
  label: string;
}): {
  child: ChildProcess;
  exited: Promise<NodeJS.Signals | null>;
} {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, JSON.stringify(config)], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.once('exit', (_code, signal) => resolve(signal)),
  );
  return { child, exited };
}

export async function killChild(c: { child: ChildProcess; exited: Promise<unknown> }): Promise<void> {
  if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL');
  await c.exited;
}

export async function appendInvoices(store: EventStore, from: number, n: number): Promise<void> {
  for (let i = from; i < from + n; i++) {
    await store.append(`invoice-${i}`, [
      { type: 'invoice.issued', data: { n: i, email: `c${i}@example.com` } },
    ]);
  }
}
