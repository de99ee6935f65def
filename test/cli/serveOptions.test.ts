import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { tempDir, type TempDir } from '../support/index.js';
import { idem, startIdem } from './cli.js';

describe('idem serve options', () => {
  let dir: TempDir;
  before(() => {
    dir = tempDir();
  });
  after(() => dir.cleanup());

  it('with tokens, --url needs IDEM_TOKEN', async () => {
    const env = { IDEM_TOKENS: 'cli=s3cret-token:admin' };
    const server = await startIdem(['serve', '--db', dir.file('tokens.db'), '--port', '0', '--json'], {
      env,
    });
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
