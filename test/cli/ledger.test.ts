import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createConsumer } from '../../src/consumer/consumer.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { sqliteTarget } from '../../src/sqlite/target.js';
import { randomConsumer, randomStream, tempDir } from '../support/index.js';
import { idem, json } from './cli.js';

describe('idem consumer prune-ledger', () => {
  it('prunes what the checkpoint covers, keeps --keep events, and the store then refuses a reset below the horizon', async () => {
    const dir = tempDir();
    try {
      const db = dir.file('idem.db');
      const targetDb = dir.file('target.db');
      const name = randomConsumer('billing');
      const store = await openSqliteStore({ path: db });
      const target = sqliteTarget(targetDb);
      try {
        await store.append(
          randomStream('invoice'),
          Array.from({ length: 20 }, (_, i) => ({ type: 'invoice.issued', data: { n: i } })),
        );
        const c = createConsumer({ name, source: store, target, handle: () => undefined });
        await c.start();
        await c.whenCaughtUp();
        await c.stop();
      } finally {
        await target.close();
        await store.close();
      }
      const pruned = await idem([
        'consumer',
        'prune-ledger',
        name,
        '--db',
        db,
        '--target-db',
        targetDb,
        '--keep',
        '5',
        '--json',
      ]);
      assert.equal(pruned.code, 0, pruned.stderr);
      assert.deepEqual(json(pruned), { consumer: name, deleted: 15, horizon: 15 });

      const below = await idem(['consumer', 'reset', name, '--to', '3', '--db', db]);
      assert.equal(below.code, 2, below.stderr);
      assert.match(below.stderr, /at least 15 .*through position 15.*new consumer version/);
      const at = await idem(['consumer', 'reset', name, '--to', '15', '--db', db]);
      assert.equal(at.code, 0, at.stderr);
      assert.match(at.stdout, /reset to position 15/);
    } finally {
      await dir.cleanup();
    }
  });
});
