import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { rawConnection, send, type ErrorReply } from '../server/rawHttp.js';
import { tempDir, until, type TempDir } from '../support/index.js';
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

  it('--allow-origin, --max-connections and --request-timeout reach the server; foreign hosts are refused without tokens', async () => {
    const help = await idem(['serve', '--help']);
    for (const flag of ['--allow-origin', '--max-connections', '--request-timeout'])
      assert.match(help.stdout, new RegExp(flag));
    const bad = await idem(['serve', '--db', dir.file('bad.db'), '--port', '0', '--max-connections', '0']);
    assert.equal(bad.code, 2, bad.stderr);
    const tokens = { IDEM_TOKENS: 'admin=admin-secret:admin;sub=sub-secret:subscribe' };
    const args = ['serve', '--db', dir.file('limits.db'), '--port', '0', '--json'];
    const server = await startIdem(
      [
        ...args,
        '--allow-origin',
        'https://dash.example',
        '--max-connections',
        '2',
        '--request-timeout',
        '1000',
      ],
      { env: tokens },
    );
    try {
      const [, url] = await server.waitFor(/"url":"(http:\/\/127\.0\.0\.1:\d+)"/);
      const auth = { authorization: 'Bearer admin-secret' };
      const listed = await send(url!, 'GET', '/v1/events', { ...auth, origin: 'https://dash.example' });
      assert.equal(listed.status, 200, listed.text);
      assert.equal(listed.headers['access-control-allow-origin'], 'https://dash.example');
      assert.equal(
        (await send(url!, 'GET', '/v1/events', { ...auth, origin: 'https://evil.example' })).status,
        403,
      );
      const slow = await rawConnection(url!);
      slow.socket.write('GET /v1/events HTTP/1.1\r\nhost: 127.0.0.1\r\n');
      const idle = await rawConnection(url!);
      const refused = await send(url!, 'GET', '/health');
      assert.equal(refused.status, 503, refused.text);
      assert.match((refused.json as ErrorReply).error.message, /at most 2/);
      await until(() => slow.closed(), { message: 'the unfinished request to time out', timeoutMs: 15_000 });
      idle.socket.destroy();
    } finally {
      await server.stop('SIGINT');
    }
    const open = await startIdem(['serve', '--db', dir.file('open.db'), '--port', '0', '--json']);
    try {
      const [, url] = await open.waitFor(/"url":"(http:\/\/127\.0\.0\.1:\d+)"/);
      const rebound = await send(url!, 'GET', '/v1/events', { host: 'evil.example' });
      assert.equal(rebound.status, 403);
      assert.match((rebound.json as ErrorReply).error.message, /tokens/);
    } finally {
      await open.stop('SIGINT');
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
