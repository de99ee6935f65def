import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { EventStore } from '../core/eventStore.js';
import type { RunningServer } from './serve.js';
import { UsageError } from './usageError.js';

/**
 * A stand-in for builds without src/server: `GET /health` answers with the store's head position,
 * everything else is 404 with a message saying the API is not built. Loopback only.
 */
export async function startHealthOnlyServer(
  store: EventStore,
  host: string,
  port: number,
): Promise<RunningServer> {
  if (!['127.0.0.1', 'localhost', '::1'].includes(host)) {
    throw new UsageError('without the full server (no tokens), only a loopback --host is allowed');
  }
  const server = createServer((req, res) => {
    const send = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    if (req.method === 'GET' && (req.url === '/health' || req.url?.startsWith('/health?'))) {
      store.headPosition().then(
        (head) => send(200, { status: 'ok', head, server: 'health-only' }),
        (err: unknown) =>
          send(503, { status: 'unavailable', error: err instanceof Error ? err.message : String(err) }),
      );
      return;
    }
    send(404, {
      error: {
        code: 'not_found',
        message: 'this build serves only GET /health; the HTTP API is not built yet',
      },
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const { port: actual } = server.address() as AddressInfo;
  const shown = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shown}:${actual}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
