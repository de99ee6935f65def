// Child process of the live-latency scenario: the idem server in its own process, as it is deployed,
// with the producer appending in the server's process (as its HTTP route does, minus HTTP). Run by
// `fork` (see scenarios/liveLatency.ts); not a public entry point.
//
// IPC: the child says `ready` with the server's URL; on `go` it appends `total` events at `rate` per
// second and, once every append is acknowledged, reports `sent` (ids and send times on the shared
// monotonic clock); on `close` it closes the server and the store and exits.
import { startServer } from '../server/index.js';
import { openSqliteStore } from '../sqlite/index.js';
import { pacedSends, type PacedSends } from './pacedProducer.js';
import { newEvent, streamOf } from './workload.js';

export type ServerChildMessage =
  | { kind: 'ready'; url: string }
  | ({ kind: 'sent'; ids: string[] } & PacedSends)
  | { kind: 'error'; message: string };

export type ParentMessage = { kind: 'go' } | { kind: 'close' };

function say(m: ServerChildMessage): void {
  process.send?.(m);
}

async function main(path: string, total: number, rate: number): Promise<void> {
  const store = await openSqliteStore({ path, durability: 'full' });
  const server = await startServer({ store, port: 0 });
  const closed = new Promise<void>((resolve) => {
    process.on('message', (m: ParentMessage) => {
      if (m.kind === 'close') resolve();
      if (m.kind !== 'go') return;
      const events = Array.from({ length: total }, (_, i) => newEvent(i));
      const appends: Promise<unknown>[] = [];
      pacedSends(total, rate, (i) => appends.push(store.append(streamOf(i), [events[i]!])))
        .then(async (sends) => {
          await Promise.all(appends);
          say({ kind: 'sent', ids: events.map((e) => e.id), ...sends });
        })
        .catch((err: unknown) =>
          say({ kind: 'error', message: err instanceof Error ? err.message : String(err) }),
        );
    });
    process.on('disconnect', resolve);
  });
  say({ kind: 'ready', url: server.url });
  await closed;
  await server.close();
  await store.close();
}

const [path, total, rate] = process.argv.slice(2);
main(path!, Number(total), Number(rate)).then(
  () => {
    if (process.connected) process.disconnect();
  },
  (err: unknown) => {
    process.exitCode = 1;
    say({ kind: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    if (process.connected) process.disconnect();
  },
);
