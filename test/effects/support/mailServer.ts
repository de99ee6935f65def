// A fake mail service on a real local HTTP port. It honours the Idempotency-Key header the way the
// docs ask of external systems: a repeated key returns the first result and sends nothing again.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface MailCall {
  key: string;
  body: unknown;
  /** The `x-dispatcher` header: which dispatcher made the call. */
  from: string;
}

export interface MailServer {
  url: string;
  /** Every request received, duplicates included (a hung request counts). */
  calls: MailCall[];
  /** Emails actually sent: one per idempotency key. */
  sent: Map<string, unknown>;
  /** Answer the next `n` requests with 503 (before sending anything). */
  failNext(n: number): void;
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let data = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (data += chunk));
    req.on('end', () => resolve(data));
    req.on('error', reject);
  });
}

export async function startMailServer(): Promise<MailServer> {
  const calls: MailCall[] = [];
  const sent = new Map<string, unknown>();
  let failures = 0;
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const key = req.headers['idempotency-key'];
    const body = JSON.parse((await readBody(req)) || 'null') as unknown;
    if (req.method !== 'POST' || url.pathname !== '/send' || typeof key !== 'string') {
      res.writeHead(400).end();
      return;
    }
    calls.push({ key, body, from: String(req.headers['x-dispatcher'] ?? '') });
    // The caller dies before the answer: the request stays open until its socket closes.
    if (url.searchParams.get('hang') === '1') return;
    if (failures > 0) {
      failures--;
      res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"try later"}');
      return;
    }
    const duplicate = sent.has(key);
    if (!duplicate) sent.set(key, body);
    res
      .writeHead(duplicate ? 200 : 201, { 'content-type': 'application/json' })
      .end(JSON.stringify({ id: `msg-${key}`, duplicate }));
  };
  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.writeHead(500).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    sent,
    failNext: (n) => {
      failures = n;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** An effect handler that sends through the fake mail server with the effect's idempotency key. */
export function mailHandler(url: string, path = '/send', from = '') {
  return async (payload: unknown, info: { idempotencyKey: string }): Promise<unknown> => {
    const res = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'idempotency-key': info.idempotencyKey,
        'x-dispatcher': from,
      },
      body: JSON.stringify(payload),
    });
    if (res.status >= 400) throw new Error(`mail server answered ${res.status}`);
    return await res.json();
  };
}
