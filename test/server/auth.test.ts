/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-argument --
   reply bodies are untyped JSON on purpose: the assertions check them field by field. */
// Tokens and scopes: every route and the WebSocket refuse a caller without a token (401) or without the scope (403).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { connect } from '../../src/client/connect.js';
import { createServer, type IdemServer } from '../../src/server/createServer.js';
import { startServer } from '../../src/server/startServer.js';
import { isLoopback } from '../../src/server/startServer.js';
import {
  loadTokens,
  parseTokens,
  sha256Hex,
  TokenRegistry,
  type Scope,
  type TokenConfig,
} from '../../src/server/tokens.js';
import { openSqliteStore, type SqliteEventStore } from '../../src/sqlite/sqliteStore.js';
import { randomConsumer } from '../support/names.js';
import { tempDir, type TempDir } from '../support/tempDir.js';
import { injectRequester, type Requester } from './requester.js';
import { startTestServer, type ServerFixture } from './serverFixture.js';

const TOKENS: TokenConfig[] = [
  { name: 'reader', token: 'tok-read', scopes: ['read'] },
  { name: 'writer', token: 'tok-append', scopes: ['append'] },
  { name: 'listener', token: 'tok-subscribe', scopes: ['subscribe'] },
  { name: 'ops', sha256: sha256Hex('tok-admin'), scopes: ['admin'] },
  {
    name: 'invoicing',
    token: 'tok-invoice',
    scopes: ['read', 'append', 'subscribe'],
    streamPrefixes: ['invoice-'],
  },
];
const SECRET: Record<Exclude<Scope, never>, string> = {
  read: 'tok-read',
  append: 'tok-append',
  subscribe: 'tok-subscribe',
  admin: 'tok-admin',
};

/** [method, path, scope, body] for every HTTP route that needs a token. */
const ROUTES: [string, string, Scope, unknown][] = [
  ['POST', '/v1/streams/invoice-1/events', 'append', { events: [{ type: 'a', data: 1 }] }],
  ['POST', '/v1/appends', 'append', { appends: [{ stream: 'invoice-1', events: [{ type: 'a', data: 1 }] }] }],
  ['GET', '/v1/streams/invoice-1/events', 'read', undefined],
  ['GET', '/v1/events', 'read', undefined],
  ['GET', '/v1/consumers', 'read', undefined],
  ['GET', '/v1/consumers/c_v1', 'read', undefined],
  ['DELETE', '/v1/consumers/c_v1', 'admin', undefined],
  ['POST', '/v1/consumers/c_v1/reset', 'admin', { position: 0 }],
  ['POST', '/v1/consumers/c_v1/pause', 'admin', {}],
  ['POST', '/v1/consumers/c_v1/resume', 'admin', undefined],
  ['GET', '/v1/consumers/c_v1/dead-letters', 'read', undefined],
  ['POST', '/v1/consumers/c_v1/dead-letters/retry', 'admin', { stream: 'invoice-1' }],
  ['POST', '/v1/consumers/c_v1/dead-letters/skip', 'admin', { stream: 'invoice-1' }],
  ['GET', '/v1/consumers/c_v1/monitors', 'read', undefined],
  ['GET', '/v1/lag-history', 'read', undefined],
  ['GET', '/v1/effects', 'read', undefined],
  ['POST', '/v1/effects/retry', 'admin', { allFailed: true }],
  ['GET', '/metrics', 'read', undefined],
];

describe('HTTP routes enforce tokens and scopes', () => {
  let dir: TempDir;
  let store: SqliteEventStore;
  let server: IdemServer;
  let request: Requester;
  before(async () => {
    dir = tempDir();
    store = await openSqliteStore({ path: dir.file('events.db') });
    server = await createServer({ store, tokens: TOKENS });
    request = injectRequester(server.app);
  });
  after(async () => {
    await server.close();
    await store.close();
    await dir.cleanup();
  });

  for (const [method, path, scope, body] of ROUTES) {
    const opts = body === undefined ? {} : { body };
    it(`${method} ${path}: 401 without or with a bad token, 403 without "${scope}", allowed with it`, async () => {
      const head = await store.headPosition();
      const none = await request(method, path, opts);
      assert.equal(none.status, 401, none.text);
      assert.equal(none.json.error.code, 'unauthorized');
      const bad = await request(method, path, { ...opts, token: 'not-a-token' });
      assert.equal(bad.status, 401);
      const malformed = await request(method, path, {
        ...opts,
        headers: { authorization: 'Basic dG9rLWFkbWlu' },
      });
      assert.equal(malformed.status, 401);
      for (const other of ['read', 'append', 'subscribe'] as const) {
        if (other === scope) continue;
        const r = await request(method, path, { ...opts, token: SECRET[other] });
        assert.equal(r.status, 403, `${other} token: ${r.text}`);
        assert.equal(r.json.error.code, 'forbidden');
        assert.match(r.json.error.message, new RegExp(scope));
      }
      assert.equal(await store.headPosition(), head, 'a refused request writes nothing');
      for (const allowed of [SECRET[scope], SECRET.admin]) {
        const r = await request(method, path, { ...opts, token: allowed });
        assert.ok(
          r.status !== 401 && r.status !== 403,
          `${method} ${path} with a ${scope} token: ${r.status} ${r.text}`,
        );
      }
    });
  }

  it('/health and the dashboard stay open', async () => {
    assert.equal((await request('GET', '/health')).status, 200);
    assert.equal((await request('GET', '/')).status, 200);
    const script = await server.app.inject({ method: 'GET', url: '/dashboard/app.js' });
    assert.equal(script.statusCode, 200);
    assert.match(String(script.headers['content-security-policy']), /script-src 'self'/);
  });

  it('/v1/session tells any valid token what it may do', async () => {
    assert.equal((await request('GET', '/v1/session')).status, 401);
    const reader = await request('GET', '/v1/session', { token: 'tok-read' });
    assert.deepEqual(reader.json, { name: 'reader', scopes: ['read'], streamPrefixes: null, tokens: true });
    const writer = await request('GET', '/v1/session', { token: 'tok-append' });
    assert.deepEqual(writer.json.scopes, ['append']);
    const ops = await request('GET', '/v1/session', { token: 'tok-admin' });
    assert.deepEqual(ops.json.scopes, ['read', 'append', 'subscribe', 'admin']);
    const tenant = await request('GET', '/v1/session', { token: 'tok-invoice' });
    assert.deepEqual(tenant.json.streamPrefixes, ['invoice-']);
  });

  it('a stream-prefix token touches only its streams', async () => {
    const t = { token: 'tok-invoice' };
    assert.equal(
      (
        await request('POST', '/v1/streams/invoice-9/events', {
          ...t,
          body: { events: [{ type: 'a', data: 1 }] },
        })
      ).status,
      201,
    );
    const head = await store.headPosition();
    const foreign = await request('POST', '/v1/streams/order-9/events', {
      ...t,
      body: { events: [{ type: 'a', data: 1 }] },
    });
    assert.equal(foreign.status, 404, 'a stream outside the prefixes is not found');
    assert.equal(foreign.json.error.code, 'not_found');
    assert.equal(await store.headPosition(), head);
    await request('POST', '/v1/streams/order-9/events', {
      token: 'tok-append',
      body: { events: [{ type: 'o', data: 1 }] },
    });
    assert.equal((await request('GET', '/v1/streams/order-9/events', t)).status, 404);
    const all = await request('GET', '/v1/events', t);
    assert.equal(all.status, 200);
    assert.ok(all.json.events.length > 0);
    assert.ok(
      all.json.events.every((e: { stream: string }) => e.stream.startsWith('invoice-')),
      all.text,
    );
    assert.equal((await request('GET', '/v1/events?categories=order', t)).status, 403);
    assert.equal((await request('GET', '/v1/events?streamPrefixes=order-', t)).status, 403);
    assert.equal((await request('GET', '/v1/events?streamPrefixes=invoice-9', t)).status, 200);
    assert.equal((await request('GET', '/metrics', t)).status, 403);
    // Consumers: only those whose filter lies inside the prefixes are visible.
    const inside = randomConsumer();
    const outside = randomConsumer();
    await (await store.subscribe(inside, { filter: { streamPrefixes: ['invoice-9'] } })).close();
    await (await store.subscribe(outside, { filter: { categories: ['order'] } })).close();
    const list = await request('GET', '/v1/consumers', t);
    const names = (list.json.consumers as { name: string }[]).map((c) => c.name);
    assert.ok(names.includes(inside) && !names.includes(outside), list.text);
    assert.equal((await request('GET', `/v1/consumers/${inside}`, t)).status, 200);
    assert.equal((await request('GET', `/v1/consumers/${outside}`, t)).status, 404);
  });
});

describe('the WebSocket enforces tokens and scopes', () => {
  let f: ServerFixture;
  before(async () => {
    f = await startTestServer({ tokens: TOKENS });
  });
  after(async () => {
    await f.cleanup();
  });

  const codeOf = async (p: Promise<unknown>): Promise<string> => {
    try {
      const sub = await p;
      await (sub as { close(): Promise<void> }).close();
      return 'ok';
    } catch (err) {
      return (err as { code: string }).code;
    }
  };

  it('refuses the upgrade without a token (401) and without the subscribe scope (403)', async () => {
    const name = randomConsumer();
    assert.equal(await codeOf(connect(f.url).subscribe(name)), 'unauthorized');
    assert.equal(await codeOf(connect(f.url, { token: 'wrong' }).subscribe(name)), 'unauthorized');
    for (const scope of ['read', 'append'] as const) {
      assert.equal(await codeOf(connect(f.url, { token: SECRET[scope] }).subscribe(name)), 'forbidden');
    }
    assert.equal(await codeOf(connect(f.url, { token: SECRET.subscribe }).subscribe(name)), 'ok');
    assert.equal(await codeOf(connect(f.url, { token: SECRET.admin }).subscribe(name)), 'ok');
  });

  it('a stream-prefix token subscribes only with a filter inside its prefixes', async () => {
    const c = connect(f.url, { token: 'tok-invoice' });
    assert.equal(await codeOf(c.subscribe(randomConsumer())), 'forbidden');
    assert.equal(
      await codeOf(c.subscribe(randomConsumer(), { filter: { categories: ['invoice'] } })),
      'forbidden',
    );
    assert.equal(
      await codeOf(c.subscribe(randomConsumer(), { filter: { streamPrefixes: ['invoice-4'] } })),
      'ok',
    );
  });

  it('the remote client sends its token on HTTP calls too', async () => {
    assert.equal(
      await codeOf(
        connect(f.url)
          .append('invoice-1', [{ type: 'a', data: 1 }])
          .then(() => ({ close: async () => {} })),
      ),
      'unauthorized',
    );
    const r = await connect(f.url, { token: SECRET.append }).append('invoice-1', [{ type: 'a', data: 1 }]);
    assert.equal(r.version, 1);
  });
});

describe('token configuration', () => {
  it('parses the compact form and JSON, hashes secrets and checks them', () => {
    const compact = parseTokens('ci=s3cret:read,append:invoice-,order-;\n# comment\nops=0ps:admin');
    assert.deepEqual(compact[0], {
      name: 'ci',
      token: 's3cret',
      scopes: ['read', 'append'],
      streamPrefixes: ['invoice-', 'order-'],
    });
    const json = parseTokens(
      JSON.stringify({ tokens: [{ name: 'x', sha256: sha256Hex('abc'), scopes: ['read'] }] }),
    );
    const registry = new TokenRegistry([...compact, ...json]);
    assert.equal(registry.authenticate('Bearer s3cret').name, 'ci');
    assert.deepEqual([...registry.authenticate('Bearer 0ps').scopes].sort(), [
      'admin',
      'append',
      'read',
      'subscribe',
    ]);
    assert.equal(registry.authenticate('bearer abc').name, 'x');
    assert.throws(() => registry.authenticate('Bearer s3cre'), { code: 'unauthorized' });
    assert.throws(() => registry.authenticate(undefined), { code: 'unauthorized' });
    assert.throws(() => new TokenRegistry(parseTokens('x=y:write')), { code: 'invalid_input' });
    assert.throws(() => new TokenRegistry([{ name: 'n', scopes: ['read'] }]), { code: 'invalid_input' });
    assert.throws(() => parseTokens('just-a-secret'), { code: 'invalid_input' });
    const fromEnv = loadTokens({ env: { IDEM_TOKENS: 'a=b:read' } });
    assert.equal(fromEnv.length, 1);
  });

  it('refuses to listen on a non-loopback address without tokens, and allows it with tokens', async () => {
    assert.ok(
      isLoopback('127.0.0.1') && isLoopback('::1') && isLoopback('localhost') && isLoopback('127.1.2.3'),
    );
    assert.ok(!isLoopback('0.0.0.0') && !isLoopback('10.0.0.1') && !isLoopback('::'));
    const dir = tempDir();
    const store = await openSqliteStore({ path: dir.file('events.db') });
    try {
      await assert.rejects(
        startServer({ store, host: '0.0.0.0', port: 0 }),
        (err: { code: string; details: { field: string } }) => {
          assert.equal(err.code, 'invalid_input');
          assert.equal(err.details.field, 'host');
          return true;
        },
      );
      const server = await startServer({ store, host: '0.0.0.0', port: 0, tokens: TOKENS });
      try {
        const r = await fetch(`http://127.0.0.1:${server.port}/v1/events`, {
          headers: { authorization: 'Bearer tok-read' },
        });
        assert.equal(r.status, 200);
      } finally {
        await server.close();
      }
    } finally {
      await store.close();
      await dir.cleanup();
    }
  });
});
