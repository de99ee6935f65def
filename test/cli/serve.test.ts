import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { RecordedEvent } from '../../src/core/index.js';
import { randomStream, tempDir, type TempDir } from '../support/index.js';
import { idem, json, startIdem } from './cli.js';

describe('idem serve', () => {
  let dir: TempDir;
  before(() => {
    dir = tempDir();
  });
  after(() => dir.cleanup());

  it('serves the store over HTTP until SIGTERM; store verbs work with --url', async () => {
    const db = dir.file('served/idem.db');
    const server = await startIdem(['serve', '--db', db, '--port', '0']);
    try {
      const [, url] = await server.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+) \(store: /);
      const health = await fetch(`${url}/health`);
      assert.equal(health.status, 200);
      const stream = randomStream('remote');
      const appended = await idem(['append', stream, '--type', 'remote.made', '--data', '{"ok":true}', '--url', url!]);
      assert.equal(appended.code, 0, appended.stderr);
      const conflict = await idem(['append', stream, '--type', 'remote.made', '--data', '1', '--expected-version', '0', '--url', url!]);
      assert.equal(conflict.code, 3);
      assert.match(conflict.stderr, /^idem: wrong_expected_version: /m);
      const read = await idem(['read', stream, '--url', url!, '--json']);
      assert.deepEqual(json<RecordedEvent[]>(read).map((e) => e.data), [{ ok: true }]);
    } finally {
      const exit = await server.stop('SIGTERM');
      assert.equal(exit.code, 0, exit.stderr);
      assert.match(exit.stderr, /idem: stopped/);
    }
    const local = await idem(['events', '--db', db, '--json']);
    assert.equal(json<RecordedEvent[]>(local).length, 1, 'the server wrote to --db and closed it cleanly');
  });

  it('with tokens, --url needs IDEM_TOKEN', async () => {
    const env = { IDEM_TOKENS: 'cli=s3cret-token:admin' };
    const server = await startIdem(['serve', '--db', dir.file('tokens.db'), '--port', '0', '--json'], { env });
    try {
      const [, url] = await server.waitFor(/"url":"(http:\/\/127\.0\.0\.1:\d+)"/);
      const [denied, allowed] = await Promise.all([
        idem(['events', '--url', url!]),
        idem(['events', '--url', url!], { env: { IDEM_TOKEN: 's3cret-token' } }),
      ]);
      assert.equal(denied.code, 1);
      assert.match(denied.stderr, /^idem: unauthorized: /m);
      assert.equal(allowed.code, 0, allowed.stderr);
    } finally {
      const exit = await server.stop('SIGINT');
      assert.equal(exit.code, 0, exit.stderr);
    }
  });

  it('refuses a port in use with exit 2', async () => {
    const first = await startIdem(['serve', '--db', dir.file('a.db'), '--port', '0']);
    try {
      const [, port] = await first.waitFor(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      const second = await idem(['serve', '--db', dir.file('b.db'), '--port', port!]);
      assert.equal(second.code, 2);
      assert.match(second.stderr, /already in use/);
    } finally {
      await first.stop('SIGINT');
    }
  });
});
