// Crypto-shredding in consumer groups and when `onShred` fails: the partition owning a shredded
// stream forgets it, every partition's shred cursor moves on, and a failing `onShred` is retried.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { createConsumer } from '../../src/consumer/consumer.js';
import { partitionRecordName } from '../../src/core/consumerGroups.js';
import { streamPartition } from '../../src/core/streamHash.js';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { sqliteTarget } from '../../src/sqlite/target.js';
import { randomCategory, randomConsumer } from '../support/names.js';
import { tempDir } from '../support/tempDir.js';
import { until } from '../support/until.js';

const encrypt = { subject: (e: { stream: string }) => e.stream };

it('in a group of 2 partitions, the partition owning a shredded stream calls onShred; both cursors move on', async () => {
  const dir = tempDir();
  const store = await openSqliteStore({ path: dir.file('events.db'), encrypt });
  const target = sqliteTarget(dir.file('target.db'));
  const cat = randomCategory('acct');
  const name = randomConsumer('accounts');
  const calls: { stream: string; partition: number }[] = [];
  const streams = [`${cat}-a`, `${cat}-b`, `${cat}-c`, `${cat}-d`];
  const consumer = createConsumer({
    name,
    source: store,
    target,
    partitions: 2,
    filter: { categories: [cat] },
    handle: () => undefined,
    onShred: (stream, ctx) => {
      assert.equal(ctx.consumer, name);
      calls.push({ stream, partition: streamPartition(stream, 2) });
    },
  });
  try {
    for (const s of streams) await store.append(s, [{ type: 'opened', data: { owner: s } }]);
    await consumer.start();
    await consumer.whenCaughtUp();
    for (const s of streams) await store.shred(s);
    const last = (await store.shreds(0)).at(-1)!.seq;
    await until(
      async () =>
        (await target.shredCursor(partitionRecordName(name, 0))) >= last &&
        (await target.shredCursor(partitionRecordName(name, 1))) >= last,
      { message: 'both partitions to follow the shreds' },
    );
    assert.deepEqual(
      calls.map((c) => c.stream).sort(),
      streams,
      'each stream forgotten once, by its own partition',
    );
  } finally {
    await consumer.stop();
    await target.close();
    await store.close();
    await dir.cleanup();
  }
});

it('an onShred that throws shows in status().lastError and is tried again until it succeeds', async () => {
  const dir = tempDir();
  const store = await openSqliteStore({ path: dir.file('events.db'), encrypt });
  const target = sqliteTarget(dir.file('target.db'));
  const stream = `${randomCategory('acct')}-x`;
  const name = randomConsumer('accounts');
  let tries = 0;
  const consumer = createConsumer({
    name,
    source: store,
    target,
    handle: () => undefined,
    onShred: () => {
      tries++;
      if (tries === 1) throw new Error('projection offline');
    },
  });
  try {
    await store.append(stream, [{ type: 'opened', data: { a: 1 } }]);
    await consumer.start();
    await consumer.whenCaughtUp();
    await store.shred(stream);
    await until(() => consumer.status().lastError?.message === 'projection offline', {
      message: 'the failure to show',
    });
    await until(async () => (await target.shredCursor(name)) === 1, { message: 'the retry to succeed' });
    assert.equal(tries, 2);
    assert.equal(consumer.status().lastError, undefined);
  } finally {
    await consumer.stop();
    await target.close();
    await store.close();
    await dir.cleanup();
  }
});
