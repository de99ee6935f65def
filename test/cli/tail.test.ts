import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { RecordedEvent } from '../../src/core/index.js';
import { openSqliteStore, type SqliteEventStore } from '../../src/sqlite/index.js';
import { randomConsumer, randomStream, tempDir, type TempDir } from '../support/index.js';
import { idem, startIdem } from './cli.js';

describe('idem tail', () => {
  let dir: TempDir;
  let db: string;
  let store: SqliteEventStore;

  before(async () => {
    dir = tempDir();
    db = dir.file('idem.db');
    store = await openSqliteStore({ path: db });
    await store.append(randomStream('old'), [{ type: 'old.event', data: 0 }]);
  });
  after(async () => {
    await store?.close();
    await dir.cleanup();
  });

  it('prints events appended after it starts, and exits 0 on SIGINT', async () => {
    const tail = await startIdem(['tail', '--db', db]);
    try {
      await tail.waitFor(/tailing .* after position 1;/, 'stderr');
      const stream = randomStream('live');
      await store.append(stream, [
        { type: 'live.one', data: { n: 1 } },
        { type: 'live.two', data: { n: 2 } },
      ]);
      await tail.waitFor(new RegExp(`${stream}@2 live\\.two`));
      assert.match(tail.stdout(), new RegExp(`^#2 ${stream}@1 live\\.one \\S+ \\{"n":1\\}`));
      assert.doesNotMatch(tail.stdout(), /old\.event/, 'history before the head is not printed');
    } finally {
      const exit = await tail.stop('SIGINT');
      assert.equal(exit.code, 0, exit.stderr);
    }
  });

  it('--json --type prints matching events as JSON lines', async () => {
    const tail = await startIdem(['tail', '--db', db, '--json', '--type', 'wanted', '--from', 'start']);
    try {
      await tail.waitFor(/tailing .* after position 0;/, 'stderr');
      const stream = randomStream('filtered');
      await store.append(stream, [{ type: 'unwanted', data: 1 }]);
      await store.append(stream, [{ type: 'wanted', data: 2 }]);
      await tail.waitFor(/"type":"wanted"/);
    } finally {
      const exit = await tail.stop('SIGTERM');
      assert.equal(exit.code, 0, exit.stderr);
      const lines = exit.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as RecordedEvent);
      assert.deepEqual(
        lines.map((e) => [e.type, e.data]),
        [['wanted', 2]],
      );
    }
  });

  it('--consumer catches up, prints live events and acknowledges them as a durable consumer', async () => {
    const consumer = randomConsumer('tail');
    const stream = randomStream('acked');
    await store.append(stream, [{ type: 'acked.before', data: 1 }]);
    const tail = await startIdem([
      'tail',
      '--db',
      db,
      '--consumer',
      consumer,
      '--prefix',
      stream,
      '--from',
      'start',
    ]);
    let last = 0;
    try {
      await tail.waitFor(
        new RegExp(`tailing as consumer "${consumer}" \\(epoch \\d+\\) from position 0`),
        'stderr',
      );
      await tail.waitFor(new RegExp(`${stream}@1 acked\\.before`));
      await tail.waitFor(/caught up at position \d+/, 'stderr');
      last = (await store.append(stream, [{ type: 'acked.live', data: 2 }])).lastPosition;
      await tail.waitFor(new RegExp(`${stream}@2 acked\\.live`));
      const busy = await idem(['consumer', 'reset', consumer, '--to', '0', '--db', db]);
      assert.equal(busy.code, 3, 'the tail owns the consumer');
    } finally {
      const exit = await tail.stop('SIGINT');
      assert.equal(exit.code, 0, exit.stderr);
    }
    const info = await store.consumers.get(consumer);
    assert.equal(info.position, last, 'the live event was acknowledged');
    assert.equal(info.status, 'stopped');
    assert.deepEqual(info.filter, { streamPrefixes: [stream] });
  });
});
