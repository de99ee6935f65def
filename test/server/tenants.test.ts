/* eslint-disable @typescript-eslint/no-unsafe-member-access --
   reply bodies are untyped JSON on purpose: the assertions check them field by field. */
// A stream-prefix-restricted token learns nothing about other tenants: names outside its prefixes
// answer exactly like missing ones (404), and conflicts do not show another tenant's owner or filter.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { parseTokens } from '../../src/server/tokens.js';
import { randomConsumer } from '../support/index.js';
import { fetchRequester, type Requester } from './requester.js';
import { startTestServer, type ServerFixture } from './serverFixture.js';
import { errorCode, WsPeer } from './wsPeer.js';

const TOKENS = parseTokens(
  'admin=admin-secret:admin;sub=sub-secret:subscribe;inv=inv-secret:admin:invoice-',
  'IDEM_TOKENS',
);
const INV = { token: 'inv-secret' };

describe('a prefix-restricted token cannot see other tenants', () => {
  let f: ServerFixture;
  let request: Requester;
  before(async () => {
    f = await startTestServer({ tokens: TOKENS });
    request = fetchRequester(f.url);
  });
  after(() => f.cleanup());

  it('a consumer or stream outside its prefixes answers like a missing one (404)', async () => {
    const other = randomConsumer('orders');
    await (await f.store.subscribe(other, { filter: { categories: ['order'] } })).close();
    await f.store.append('order-1', [{ type: 'order.placed', data: {} }]);
    const missing = randomConsumer('missing');
    const same = (text: string, name: string): string => text.split(name).join('NAME');
    for (const [method, suffix, body] of [
      ['GET', '', undefined],
      ['DELETE', '', undefined],
      ['POST', '/reset', { position: 0 }],
      ['POST', '/pause', {}],
      ['POST', '/resume', undefined],
      ['GET', '/dead-letters', undefined],
      ['POST', '/dead-letters/retry', { stream: 'invoice-1' }],
      ['POST', '/dead-letters/skip', { stream: 'invoice-1' }],
    ] as const) {
      const opts = body === undefined ? INV : { ...INV, body };
      const hidden = await request(method, `/v1/consumers/${other}${suffix}`, opts);
      const absent = await request(method, `/v1/consumers/${missing}${suffix}`, opts);
      assert.equal(hidden.status, 404, `${method} ${suffix}: ${hidden.text}`);
      assert.equal(same(hidden.text, other), same(absent.text, missing), `${method} ${suffix}`);
    }
    const list = await request('GET', '/v1/consumers', INV);
    assert.ok(!list.text.includes(other), list.text);
    for (const [method, body] of [
      ['GET', undefined],
      ['POST', { events: [{ type: 'x', data: 1 }] }],
    ] as const) {
      const r = await request(
        method,
        '/v1/streams/order-1/events',
        body === undefined ? INV : { ...INV, body },
      );
      assert.equal(r.status, 404, r.text);
      assert.deepEqual(r.json.error, {
        code: 'not_found',
        message: 'stream "order-1" not found',
        details: { what: 'stream', name: 'order-1' },
      });
    }
    // In a list of appends, the same answer for that append alone; the one inside the prefixes is written.
    const many = await request('POST', '/v1/appends', {
      ...INV,
      body: {
        appends: [
          { stream: 'order-1', events: [{ type: 'x', data: 1 }] },
          { stream: 'invoice-1', events: [{ type: 'x', data: 1 }] },
        ],
      },
    });
    assert.equal(many.status, 200, many.text);
    assert.deepEqual(many.json.results[0], {
      error: {
        code: 'not_found',
        message: 'stream "order-1" not found',
        details: { what: 'stream', name: 'order-1' },
      },
    });
    assert.equal(many.json.results[1].stream, 'invoice-1');
    assert.equal(await f.store.streamVersion('order-1'), 1);
    // The unrestricted admin still sees it.
    assert.equal((await request('GET', `/v1/consumers/${other}`, { token: 'admin-secret' })).status, 200);
  });

  it('consumer_busy does not show the owner, consumer_identity_conflict not the other filter', async () => {
    const held = randomConsumer('held');
    const owner = '10.9.8.7:4242 (admin)';
    const holder = await f.store.subscribe(held, { filter: { streamPrefixes: ['invoice-1'] }, owner });
    const registered = randomConsumer('registered');
    await (await f.store.subscribe(registered, { filter: { categories: ['secretcategory'] } })).close();
    const inv = await WsPeer.open(f.url, INV);
    const admin = await WsPeer.open(f.url, { token: 'admin-secret' });
    try {
      const busy = async (peer: WsPeer, req: number): Promise<Record<string, unknown>> => {
        peer.send({
          type: 'subscribe',
          sub: `s${req}`,
          consumer: held,
          filter: { streamPrefixes: ['invoice-1'] },
          req,
        });
        const m = await peer.reply(req);
        assert.equal(errorCode(m), 'consumer_busy', JSON.stringify(m));
        return m.error as Record<string, unknown>;
      };
      const restricted = await busy(inv, 1);
      assert.ok(!JSON.stringify(restricted).includes('10.9.8.7'), JSON.stringify(restricted));
      assert.ok(!JSON.stringify(restricted).includes('(admin)'), JSON.stringify(restricted));
      assert.equal((restricted.details as { owner: unknown }).owner, null);
      assert.equal(
        ((await busy(admin, 2)).details as { owner: string }).owner,
        owner,
        'the admin sees the owner',
      );

      const reset = await request('POST', `/v1/consumers/${held}/reset`, { ...INV, body: { position: 0 } });
      assert.equal(reset.status, 409, reset.text);
      assert.equal(reset.json.error.code, 'consumer_busy');
      assert.ok(!reset.text.includes('10.9.8.7') && reset.json.error.details.owner === null, reset.text);

      const conflict = async (peer: WsPeer, req: number): Promise<string> => {
        peer.send({
          type: 'subscribe',
          sub: `c${req}`,
          consumer: registered,
          filter: { streamPrefixes: ['invoice-'] },
          req,
        });
        const m = await peer.reply(req);
        assert.equal(errorCode(m), 'consumer_identity_conflict', JSON.stringify(m));
        return JSON.stringify(m.error);
      };
      const hidden = await conflict(inv, 4);
      assert.ok(!hidden.includes('secretcategory'), hidden);
      assert.ok(
        (await conflict(admin, 5)).includes('secretcategory'),
        'the unrestricted admin sees the details',
      );
    } finally {
      await inv.close();
      await admin.close();
      await holder.close();
    }
  });
});
