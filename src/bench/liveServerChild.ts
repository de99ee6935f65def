// Child process of the live-latency scenario: the idem server in its own process, as it is deployed,
// with the producer appending in the server's process (as its HTTP route does, minus HTTP). Run by
// `fork` (see scenarios/liveLatency.ts); not a public entry point.
//
// IPC: the child says `ready` with the server's URL; on `go` it appends `total` events at `rate` per
// second and, once every append is acknowledged, reports `sent` (ids and send times on the shared
// monotonic clock); on `close` it closes the server and the store and exits.
import { startServer } from '../server/index.js';
import { openSqliteStore } from '../sqlite/index.js';
import { serveProducer } from './pacedProducer.js';
import { runChild } from './childProcess.js';

export type { ParentMessage, ServerChildMessage } from './pacedProducer.js';

async function main(path: string, total: number, rate: number): Promise<void> {
  const store = await openSqliteStore({ path, durability: 'full' });
  const server = await startServer({ store, port: 0 });
  await serveProducer(store, total, rate, server.url);
  await server.close();
  await store.close();
}

const [path, total, rate] = process.argv.slice(2);
runChild(() => main(path!, Number(total), Number(rate)));
