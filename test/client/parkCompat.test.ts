// A remote subscription's park against a server whose `ok` carries no `parkedThrough` (a server from
// before the reply said which delivered events it parked behind the dead letter).
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { WebSocketServer, type WebSocket } from 'ws';
import { connect } from '../../src/client/connect.js';
import type { RecordedEvent } from '../../src/core/event.js';
import { nextEvents } from '../subscriptions/suite/context.js';

const event = (position: number, stream: string): RecordedEvent => ({
  id: `00000000-0000-4000-8000-00000000000${position}`,
  stream,
  type: 'step',
  version: position,
  position,
  data: {},
  metadata: {},
  recordedAt: '2026-01-01T00:00:00.000Z',
});

/** Speaks just enough of `/v1/subscribe`: three events on the first `more`, and a bare `ok` to every request. */
function oldServer(socket: WebSocket, received: Record<string, unknown>[]): void {
  const send = (m: object): void => socket.send(JSON.stringify(m));
  let sent = false;
  send({ type: 'hello', protocol: 1, heartbeatMs: 3000, silenceMs: 10000, maxSubscriptions: 16 });
  socket.on('message', (data: Buffer) => {
    const m = JSON.parse(data.toString()) as Record<string, unknown> & { type: string; sub: string };
    received.push(m);
    if (m.type === 'subscribe')
      send({ type: 'subscribed', sub: m.sub, consumer: m.consumer, epoch: 1, position: 0, req: m.req });
    else if (m.type === 'more' && !sent) {
      sent = true;
      const events = [event(1, 'a-1'), event(2, 'b-1'), event(3, 'a-1')];
      send({ type: 'events', sub: m.sub, events, redelivery: false });
    } else if (m.type === 'unsubscribe') {
      send({ type: 'closed', sub: m.sub, reason: 'unsubscribed' });
      send({ type: 'ok', sub: m.sub, req: m.req });
    } else if (m.req !== undefined) send({ type: 'ok', sub: m.sub, req: m.req });
  });
}

describe('remote subscription: park against an older server', () => {
  it('takes every event it was sent as parked through, when the reply does not say', async () => {
    const received: Record<string, unknown>[] = [];
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, path: '/v1/subscribe' });
    await new Promise<void>((resolve) => wss.once('listening', resolve));
    wss.on('connection', (socket) => oldServer(socket, received));
    const remote = connect(`http://127.0.0.1:${(wss.address() as AddressInfo).port}`);
    const sub = await remote.subscribe('billing');
    try {
      const it = sub[Symbol.asyncIterator]();
      assert.deepEqual(
        (await nextEvents(it)).events.map((e) => e.position),
        [1, 2, 3],
      );
      assert.deepEqual(await sub.park(1, { reason: 'broken' }), { parkedThrough: 3 });
      const park = received.find((m) => m.type === 'park');
      assert.deepEqual(
        { position: park?.position, reason: (park?.info as { reason?: string } | undefined)?.reason },
        { position: 1, reason: 'broken' },
      );
    } finally {
      await sub.close();
      await remote.close();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    }
  });
});
