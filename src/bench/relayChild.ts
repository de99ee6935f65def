// Child process of the jetstream scenario's end-to-end row: the store and the relay in their own
// process, as deployed beside `idem serve`, with the producer appending there. Run by `fork` (see
// scenarios/jetstreamSource.ts); not a public entry point.
//
// IPC as liveServerChild's: `ready` once the relay runs; on `go` it appends `total` events at `rate`
// per second and reports `sent` (ids and send times on the shared monotonic clock) once every append
// is acknowledged; on `close` it stops the relay, closes the store and exits.
import { createJetStreamRelay } from '../nats/index.js';
import { openSqliteStore } from '../sqlite/index.js';
import { serveProducer } from './pacedProducer.js';
import { runChild } from './childProcess.js';

async function main(path: string, total: number, rate: number, nats: string, stream: string): Promise<void> {
  const store = await openSqliteStore({ path, durability: 'full' });
  const relay = createJetStreamRelay({ store, servers: nats, stream });
  await relay.start();
  await serveProducer(store, total, rate, nats);
  await relay.stop();
  await store.close();
}

const [path, total, rate, nats, stream] = process.argv.slice(2);
runChild(() => main(path!, Number(total), Number(rate), nats!, stream!));
