/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-argument --
   reply bodies are untyped JSON on purpose: the assertions check them field by field. */
// Transport hardening against a real server on a real socket: bounded error echoes and reply buffers
// on the WebSocket, request timeouts and `connection: close` for refused callers, a connection cap,
// and the Host/Origin rules that keep web pages away from a server without tokens.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createServer } from '../../src/server/createServer.js';
import { parseTokens } from '../../src/server/tokens.js';
import { randomConsumer, randomStream, until } from '../support/index.js';
import { startTestServer, withServer, type ServerFixture } from './serverFixture.js';
import { rawConnection, send, unfinishedPost, upgradeStatus } from './rawHttp.js';
import { errorCode, WsPeer } from './wsPeer.js';

const TOKENS = parseTokens('admin=admin-secret:admin;sub=sub-secret:subscribe', 'IDEM_TOKENS');
const ADMIN = { authorization: 'Bearer admin-secret' };

describe('without tokens, only loopback Host and Origin are served', () => {
  let f: ServerFixture;
  before(async () => {
    f = await startTestServer();
  });
  after(() => f.cleanup());

  it('refuses a foreign Host (DNS rebinding) with 403 and a message saying how to configure tokens', async () => {
    const port = new URL(f.url).port;
    for (const host of [
      'evil.example',
      `evil.example:${port}`,
      `10.0.0.1:${port}`,
      `127.0.0.1.evil.example`,
    ]) {
      const r = await send(f.url, 'GET', '/v1/events', { host });
      assert.equal(r.status, 403, `${host}: ${r.text}`);
      assert.equal(r.json.error.code, 'forbidden');
      assert.match(r.json.error.message, /IDEM_TOKENS|--tokens/);
      assert.equal(r.headers.connection, 'close');
    }
    const head = await f.store.headPosition();
    const write = await send(
      f.url,
      'POST',
      `/v1/streams/${randomStream()}/events`,
      { host: 'evil.example', 'content-type': 'application/json' },
      JSON.stringify({ events: [{ type: 'x', data: 1 }] }),
    );
    assert.equal(write.status, 403);
    assert.equal(await f.store.headPosition(), head, 'nothing was written');
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, 'app.localhost']) {
      assert.equal((await send(f.url, 'GET', '/v1/events', { host })).status, 200, host);
    }
  });

  it('refuses a foreign Origin (a cross-site page) on HTTP and on the WebSocket upgrade', async () => {
    for (const origin of ['https://evil.example', 'null', 'http://127.0.0.1.evil.example']) {
      const r = await send(f.url, 'GET', '/v1/consumers', { origin });
      assert.equal(r.status, 403, `${origin}: ${r.text}`);
      assert.match(r.json.error.message, /Origin .* is not loopback.*tokens/);
      assert.equal(await upgradeStatus(f.url, { origin }), 403, origin);
    }
    assert.equal(await upgradeStatus(f.url, { host: 'evil.example' }), 403);
    assert.equal(
      (await send(f.url, 'GET', '/v1/consumers', { origin: 'http://localhost:3000' })).status,
      200,
    );
    assert.equal(await upgradeStatus(f.url, { origin: 'http://127.0.0.1:8080' }), 101);
    assert.equal(await upgradeStatus(f.url, {}), 101);
  });
});

describe('with tokens, other origins need to be listed', () => {
  let f: ServerFixture;
  before(async () => {
    f = await startTestServer({ tokens: TOKENS, allowedOrigins: ['https://dash.example'] });
  });
  after(() => f.cleanup());

  it('accepts any Host, the listed origins (with CORS) and its own origin, and refuses other origins', async () => {
    assert.equal(
      (await send(f.url, 'GET', '/v1/events', { ...ADMIN, host: 'idem.internal:80' })).status,
      200,
    );
    const listed = await send(f.url, 'GET', '/v1/events', { ...ADMIN, origin: 'https://dash.example' });
    assert.equal(listed.status, 200, listed.text);
    assert.equal(listed.headers['access-control-allow-origin'], 'https://dash.example');
    const preflight = await send(f.url, 'OPTIONS', '/v1/events', {
      origin: 'https://dash.example',
      'access-control-request-method': 'GET',
      'access-control-request-headers': 'authorization',
    });
    assert.equal(preflight.status, 204, preflight.text);
    assert.match(String(preflight.headers['access-control-allow-headers']), /authorization/);
    const own = new URL(f.url).origin;
    assert.equal((await send(f.url, 'GET', '/v1/events', { ...ADMIN, origin: own })).status, 200);
    const foreign = await send(f.url, 'GET', '/v1/events', { ...ADMIN, origin: 'https://evil.example' });
    assert.equal(foreign.status, 403, foreign.text);
    assert.match(foreign.json.error.message, /--allow-origin/);
    assert.equal(foreign.headers['access-control-allow-origin'], undefined);
    assert.equal(await upgradeStatus(f.url, { ...ADMIN, origin: 'https://evil.example' }), 403);
    assert.equal(await upgradeStatus(f.url, { ...ADMIN, origin: 'https://dash.example' }), 101);
  });

  it('refuses an allowed origin that is not an origin', async () => {
    await assert.rejects(
      createServer({ store: f.store, allowedOrigins: ['https://dash.example/app'] }),
      (err: { code: string; details: { field: string } }) =>
        err.code === 'invalid_input' && err.details.field === 'allowedOrigins[0]',
    );
  });
});

describe('slow and refused requests do not hold connections', () => {
  it('a request without a token is answered 401 with connection: close and closed, its body unread', async () => {
    await withServer({ tokens: TOKENS }, async (f) => {
      const unauthorized = await unfinishedPost(f.url, 10_000_000);
      assert.match(unauthorized, /^HTTP\/1\.1 401 /);
      assert.match(unauthorized, /\r\nconnection: close\r\n/i);
      assert.match(
        await unfinishedPost(f.url, 10_000_000, 'sub-secret'),
        /^HTTP\/1\.1 403 [^]*connection: close/i,
      );
      assert.match(
        await unfinishedPost(f.url, 64 * 1024 * 1024, 'admin-secret'),
        /^HTTP\/1\.1 413 [^]*connection: close/i,
      );
    });
  });

  it('an authenticated body sent too slowly is cut off with 408 after requestTimeoutMs', async () => {
    await withServer({ tokens: TOKENS, limits: { requestTimeoutMs: 1000 } }, async (f) => {
      assert.match(await unfinishedPost(f.url, 1000, 'admin-secret', '{"events":'), /^HTTP\/1\.1 408 /);
      const headersOnly = await rawConnection(f.url);
      headersOnly.socket.write('GET /v1/events HTTP/1.1\r\nhost: 127.0.0.1\r\n');
      await until(() => headersOnly.closed(), {
        message: 'the server to close unfinished headers',
        timeoutMs: 15_000,
      });
      assert.equal(await f.store.headPosition(), 0);
    });
  });

  it('caps open connections, HTTP and WebSocket together, with a clear 503', async () => {
    await withServer({ tokens: TOKENS, limits: { maxConnections: 3 } }, async (f) => {
      const a = await rawConnection(f.url);
      const ws1 = await WsPeer.open(f.url, { token: 'sub-secret' });
      const ws2 = await WsPeer.open(f.url, { token: 'sub-secret' });
      const refused = await send(f.url, 'GET', '/health');
      assert.equal(refused.status, 503, refused.text);
      assert.equal(refused.json.error.code, 'unavailable');
      assert.match(refused.json.error.message, /too many connections.*at most 3/);
      assert.equal(refused.json.error.details.limit, 3);
      const upgrade = await upgradeStatus(f.url, { authorization: 'Bearer sub-secret' });
      assert.equal(upgrade, 503);
      await ws1.close();
      await until(async () => (await send(f.url, 'GET', '/health')).status === 200, {
        message: 'a free connection slot',
      });
      a.socket.destroy();
      await ws2.close();
    });
  });
});

describe('WebSocket replies are bounded', () => {
  it('an error quotes at most a short part of an unknown key, on the WebSocket and over HTTP', async () => {
    await withServer({ tokens: TOKENS }, async (f) => {
      const peer = await WsPeer.open(f.url, { token: 'sub-secret' });
      try {
        const key = 'k'.repeat(512 * 1024);
        peer.socket.send(`{"type":"ping","req":1,"${key}":1}`);
        const reply = await peer.reply(1);
        assert.equal(errorCode(reply), 'invalid_input');
        assert.ok(JSON.stringify(reply).length < 2000, `reply of ${JSON.stringify(reply).length} characters`);
        assert.match(
          String((reply.error as { message: string }).message),
          /k{64}\.\.\. \(524288 characters\)/,
        );
      } finally {
        await peer.close();
      }
      const body = JSON.stringify({ events: [{ type: 'x', data: 1, ['m'.repeat(1024 * 1024)]: 1 }] });
      const r = await send(
        f.url,
        'POST',
        '/v1/streams/invoice-1/events',
        { ...ADMIN, 'content-type': 'application/json' },
        body,
      );
      assert.equal(r.status, 400, r.text.slice(0, 200));
      assert.ok(r.text.length < 8000, `reply of ${r.text.length} characters`);
      const q = await send(f.url, 'GET', `/v1/events?${'q'.repeat(8000)}=1`, ADMIN);
      assert.equal(q.status, 400);
      assert.ok(q.text.length < 1000, `reply of ${q.text.length} characters`);
    });
  });

  it('closes with 1008 a connection that sends requests and never reads the replies', async () => {
    await withServer({ tokens: TOKENS, limits: { maxSendBufferBytes: 64 * 1024 } }, async (f) => {
      const peer = await WsPeer.open(f.url, { token: 'sub-secret' });
      await peer.waitFor((m) => m.type === 'hello', 'hello');
      peer.socket.pause();
      // 150,000 pongs of ~140 bytes (21 MB): far more than the kernel buffers of a loopback connection hold.
      const sent = 150_000;
      const req = 'r'.repeat(100);
      for (let i = 0; i < sent; i++) peer.socket.send(`{"type":"ping","req":"${req}"}`);
      // Once every request has left the client, the server has them all (and its replies are queued).
      await until(() => peer.socket.bufferedAmount === 0, {
        message: 'the requests to be sent',
        timeoutMs: 60_000,
      });
      await until(async () => (await send(f.url, 'GET', '/health')).status === 200, {
        message: 'a served request',
      });
      peer.socket.resume();
      await until(() => peer.closeCode !== null, {
        message: 'the server to close the connection',
        timeoutMs: 60_000,
      });
      assert.equal(peer.closeCode, 1008);
      const pongs = peer.messages.filter((m) => m.type === 'pong').length;
      assert.ok(pongs < sent, `${pongs} of ${sent} pongs were buffered`);
      // Other connections are served as before.
      assert.equal((await send(f.url, 'GET', '/health')).status, 200);
    });
  });

  it('event frames larger than the limit are delivered: only replies count against it', async () => {
    await withServer({ tokens: TOKENS, limits: { maxSendBufferBytes: 64 * 1024 } }, async (f) => {
      const stream = randomStream('big');
      for (let i = 0; i < 5; i++) await f.store.append(stream, [{ type: 'big', data: 'x'.repeat(200_000) }]);
      const peer = await WsPeer.open(f.url, { token: 'sub-secret' });
      try {
        peer.send({
          type: 'subscribe',
          sub: 's',
          consumer: randomConsumer(),
          from: 'start',
          batchSize: 5,
          req: 1,
        });
        await until(() => peer.events('s').length === 5 || peer.closeCode !== null, {
          message: 'five events',
          timeoutMs: 30_000,
        });
        assert.equal(peer.closeCode, null);
        assert.equal(peer.events('s').length, 5);
      } finally {
        await peer.close();
      }
    });
  });
});
