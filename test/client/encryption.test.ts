// Crypto-shredding over the server: a remote client appends to and reads from a server whose SQLite
// store encrypts, and shreds a subject with POST /v1/subjects/:subject/shred.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { connect } from '../../src/client/connect.js';
import { isIdemError } from '../../src/core/errors.js';
import { describeEncryption, type ShreddingStore } from '../store/encryption.suite.js';
import { startTestServer } from '../server/serverFixture.js';

describeEncryption('remote client (HTTP to a server on an encrypting SQLite store)', async (encrypt) => {
  const fixture = await startTestServer({ encrypt });
  const store = connect(fixture.url) as ShreddingStore;
  return {
    store,
    storedData: (id) =>
      Promise.resolve(
        fixture.store.db.prepare('SELECT data FROM idem_events WHERE id = ?').pluck().get(id) as string,
      ),
    cleanup: async () => {
      await store.close();
      await fixture.cleanup();
    },
  };
});

it('POST /v1/subjects/:subject/shred refuses a token limited to some streams, and a subject too long', async () => {
  const fixture = await startTestServer({
    encrypt: { subject: () => null },
    tokens: [
      { name: 'ops', token: 'ops-token-0123456789', scopes: ['admin'] },
      { name: 'billing', token: 'billing-token-012345', scopes: ['admin'], streamPrefixes: ['invoice-'] },
    ],
  });
  try {
    const shred = (subject: string, token: string) =>
      fetch(`${fixture.url}/v1/subjects/${encodeURIComponent(subject)}/shred`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
      });
    const ok = await shred('c-1', 'ops-token-0123456789');
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), { subject: 'c-1', shredded: false });
    assert.equal((await shred('c-1', 'billing-token-012345')).status, 403);
    const long = await shred('x'.repeat(201), 'ops-token-0123456789');
    assert.equal(long.status, 400);
    const remote = connect(fixture.url, { token: 'billing-token-012345' });
    await assert.rejects(remote.shred('c-1'), (err: unknown) => isIdemError(err, 'forbidden'));
    await remote.close();
  } finally {
    await fixture.cleanup();
  }
});

it('GET /v1/shreds refuses a token limited to some streams and a limit above 1000', async () => {
  const fixture = await startTestServer({
    encrypt: { subject: () => null },
    tokens: [
      { name: 'reader', token: 'reader-token-0123456789', scopes: ['read'] },
      { name: 'billing', token: 'billing-token-012345', scopes: ['read'], streamPrefixes: ['invoice-'] },
    ],
  });
  try {
    const get = (query: string, token: string) =>
      fetch(`${fixture.url}/v1/shreds${query}`, { headers: { authorization: `Bearer ${token}` } });
    const ok = await get('?after=0&limit=10', 'reader-token-0123456789');
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), { shreds: [] });
    assert.equal((await get('', 'billing-token-012345')).status, 403);
    const big = await get('?limit=1001', 'reader-token-0123456789');
    assert.equal(big.status, 400);
    assert.match(((await big.json()) as { error: { message: string } }).error.message, /^limit/);
  } finally {
    await fixture.cleanup();
  }
});
