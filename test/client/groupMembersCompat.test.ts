// A remote group member's heartbeat against a server that lists the live members by name alone (a
// server from before the reply carried each member's lease expiry).
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { connect } from '../../src/client/connect.js';

describe('remote store: group member heartbeat', () => {
  it('reads a reply of member names alone as members with unknown lease expiries', async () => {
    const bodies: unknown[] = [];
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let text = '';
      req.on('data', (c: Buffer) => (text += c.toString()));
      req.on('end', () => {
        bodies.push({ method: req.method, url: req.url, body: JSON.parse(text || 'null') as unknown });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ consumer: 'billing', members: ['m-1', 'm-2'] }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const remote = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    try {
      const members = await remote.consumers.heartbeatMember!('billing', 'm-2', 3_000);
      assert.deepEqual(members, [
        { member: 'm-1', leaseExpiresAt: null },
        { member: 'm-2', leaseExpiresAt: null },
      ]);
      assert.deepEqual(bodies, [
        { method: 'POST', url: '/v1/consumers/billing/members', body: { member: 'm-2', ttlMs: 3_000 } },
      ]);
    } finally {
      await remote.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
