// Child process of the jetstream scenario's end-to-end row: the store and the relay in their own
// process, as deployed beside `idem serve`, with the producer appending there. Run by `fork` (see
// scenarios/jetstreamSource.ts); not a public entry point.
//
// IPC as liveServerChild's: `ready` once the relay runs; on `go` it appends `total` events at `rate`
// per second and reports `sent` (ids and send times on the shared monotonic clock) once every append
// is acknowledged; on `close` it stops the relay, closes the store and exits.
import { createJetStreamRelay } from '../nats/index.js';
import { openSqliteStore } from '../sqlite/index.js';
import type { ParentMessage, ServerChildMessage } from './liveServerChild.js';
import { pacedSends } from './pacedProducer.js';
import { newEvent, streamOf } from './workload.js';

function say(m: ServerChildMessage): void {
  process.send?.(m);
}

async function main(path: string, total: number, rate: number, nats: string, stream: string): Promise<void> {
  const store = await openSqliteStore({ path, durability: 'full' });
  const relay = createJetStreamRelay({ store, servers: nats, stream });
  await relay.start();
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
  say({ kind: 'ready', url: nats });
  await closed;
  await relay.stop();
  await store.close();
}

const [path, total, rate, nats, stream] = process.argv.slice(2);
main(path!, Number(total), Number(rate), nats!, stream!).then(
  () => {
    if (process.connected) process.disconnect();
  },
  (err: unknown) => {
    process.exitCode = 1;
    say({ kind: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    if (process.connected) process.disconnect();
  },
);
