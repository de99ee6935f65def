import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { AppendResult, ConsumerInfo, RecordedEvent } from '../../src/core/index.js';
import { randomConsumer, randomStream, tempDir, type TempDir } from '../support/index.js';
import { idem, json, startIdem } from './cli.js';

describe('idem serve', () => {
  let dir: TempDir;
  before(() => {
    dir = tempDir();
  });
  after(() => dir.cleanup());

  it('serves the store over HTTP until SIGTERM; store verbs and tail --consumer work with --url', async () => {
    const db = dir.file('served/idem.db');
    const server = await startIdem(['serve', '--db', db, '--port', '0']);
    try {
      const [, url] = await server.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+) \(store: /);
      const health = await fetch(`${url}/health`);
      assert.equal(health.status, 200);
      const stream = randomStream('remote');
      const appended = await idem([
        'append',
        stream,
        '--type',
        'remote.made',
        '--data',
        '{"ok":true}',
        '--url',
        url!,
      ]);
      assert.equal(appended.code, 0, appended.stderr);
      const conflict = await idem([
        'append',
        stream,
        '--type',
        'remote.made',
        '--data',
        '1',
        '--expected-version',
        '0',
        '--url',
        url!,
      ]);
      assert.equal(conflict.code, 3);
      assert.match(conflict.stderr, /^idem: wrong_expected_version: /m);
      const read = await idem(['read', stream, '--url', url!, '--json']);
      assert.deepEqual(
        json<RecordedEvent[]>(read).map((e) => e.data),
        [{ ok: true }],
      );

      // A durable consumer over the server's WebSocket: catch-up, live, acks.
      const consumer = randomConsumer('remote');
      const tail = await startIdem([
        'tail',
        '--consumer',
        consumer,
        '--prefix',
        stream,
        '--from',
        'start',
        '--url',
        url!,
      ]);
      let last = 0;
      try {
        await tail.waitFor(new RegExp(`${stream}@1 remote\\.made`));
        await tail.waitFor(/caught up at position \d+/, 'stderr');
        const live = await idem([
          'append',
          stream,
          '--type',
          'remote.live',
          '--data',
          '2',
          '--url',
          url!,
          '--json',
        ]);
        last = json<AppendResult>(live).lastPosition;
        await tail.waitFor(new RegExp(`${stream}@2 remote\\.live`));
      } finally {
        const exit = await tail.stop('SIGINT');
        assert.equal(exit.code, 0, exit.stderr);
      }
      const info = json<ConsumerInfo>(await idem(['consumer', 'show', consumer, '--url', url!, '--json']));
      assert.equal(info.position, last, 'the remote tail acknowledged the live event');
    } finally {
      const exit = await server.stop('SIGTERM');
      assert.equal(exit.code, 0, exit.stderr);
      assert.match(exit.stderr, /idem: stopped/);
    }
    const local = await idem(['events', '--db', db, '--json']);
    assert.equal(json<RecordedEvent[]>(local).length, 2, 'the server wrote to --db and closed it cleanly');
  });
});
