// The server checks an append against its own limits before the store sees it only when the store's
// own first check would not give the same answer (`precheckAppends`): a stricter server limit, a store
// that seals events before checking (`encrypt`), or a store that does not say how it checks.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { connect } from '../../src/client/connect.js';
import { isIdemError } from '../../src/core/errors.js';
import { DEFAULT_LIMITS } from '../../src/core/limits.js';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { DEFAULT_SERVER_LIMITS, precheckAppends } from '../../src/server/context.js';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { tempDir } from '../support/tempDir.js';
import { startTestServer } from './serverFixture.js';

const event = (bytes: number) => ({ type: 'Noted', data: { text: 'x'.repeat(bytes) } });

describe('precheckAppends', () => {
  it('leaves the check to a plain store whose limits are the same or stricter', async () => {
    assert.equal(precheckAppends(createMemoryStore(), DEFAULT_LIMITS), false);
    assert.equal(
      precheckAppends(createMemoryStore({ limits: { maxEventBytes: 1000 } }), DEFAULT_LIMITS),
      false,
    );
    const dir = tempDir();
    const store = await openSqliteStore({ path: dir.file('events.db') });
    try {
      assert.equal(precheckAppends(store, DEFAULT_SERVER_LIMITS), false);
    } finally {
      await store.close();
      await dir.cleanup();
    }
  });

  it('checks first when a server limit is stricter, the store seals first, or does not say', async () => {
    const memory = createMemoryStore();
    assert.equal(precheckAppends(memory, { ...DEFAULT_LIMITS, maxEventBytes: 1000 }), true);
    assert.equal(precheckAppends(memory, { ...DEFAULT_LIMITS, maxAppendEvents: 10 }), true);
    const dir = tempDir();
    const sealing = await openSqliteStore({ path: dir.file('events.db'), encrypt: { subject: () => null } });
    const remote = connect('http://127.0.0.1:9');
    try {
      assert.equal(precheckAppends(sealing, DEFAULT_LIMITS), true);
      assert.equal(precheckAppends(remote, DEFAULT_LIMITS), true);
    } finally {
      await remote.close();
      await sealing.close();
      await dir.cleanup();
    }
  });
});

describe('appends through the server', () => {
  it("a server limit stricter than the store's is the one applied, over HTTP and the append socket", async () => {
    const fixture = await startTestServer({ limits: { maxEventBytes: 2000 } });
    const viaSocket = connect(fixture.url);
    try {
      const res = await fetch(`${fixture.url}/v1/streams/s-1/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ events: [event(5000)] }),
      });
      assert.equal(res.status, 413);
      const body = (await res.json()) as { error: { code: string; message: string } };
      assert.equal(body.error.code, 'too_large');
      assert.match(body.error.message, /2000/);

      await assert.rejects(viaSocket.append('s-1', [event(5000)]), (err: unknown) => {
        assert.ok(isIdemError(err));
        assert.equal(err.code, 'too_large');
        assert.match(err.message, /2000/);
        return true;
      });
      // Within the server's limit, the append is written.
      const ok = await viaSocket.append('s-1', [event(1000)]);
      assert.equal(ok.version, 1);
      assert.equal(await fixture.store.headPosition(), 1);
    } finally {
      await viaSocket.close();
      await fixture.cleanup();
    }
  });

  it('with the same limits, the store refuses as the server did: same code and message', async () => {
    const fixture = await startTestServer({ storeLimits: { maxEventBytes: 2000 } });
    const viaSocket = connect(fixture.url);
    try {
      const direct = await fixture.store.append('s-1', [event(5000)]).then(
        () => assert.fail('the store accepted an event over its limit'),
        (err: unknown) => err,
      );
      if (!isIdemError(direct)) assert.fail(`not an IdemError: ${String(direct)}`);
      await assert.rejects(viaSocket.append('s-1', [event(5000)]), (err: unknown) => {
        assert.ok(isIdemError(err));
        assert.equal(err.code, direct.code);
        assert.equal(err.message, direct.message);
        return true;
      });
      assert.equal(await fixture.store.headPosition(), 0);
    } finally {
      await viaSocket.close();
      await fixture.cleanup();
    }
  });

  it('an encrypting store never sees an event the limits refuse: its subject function is not called', async () => {
    let calls = 0;
    const fixture = await startTestServer({
      storeLimits: { maxEventBytes: 2000 },
      encrypt: {
        subject: () => {
          calls++;
          return 'c-1';
        },
      },
    });
    const viaSocket = connect(fixture.url);
    try {
      await assert.rejects(viaSocket.append('s-1', [event(5000)]), (err: unknown) => {
        assert.ok(isIdemError(err));
        assert.equal(err.code, 'too_large');
        return true;
      });
      assert.equal(calls, 0);
      await viaSocket.append('s-1', [event(100)]);
      assert.equal(calls, 1);
    } finally {
      await viaSocket.close();
      await fixture.cleanup();
    }
  });
});
