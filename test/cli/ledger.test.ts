import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { createConsumer } from '../../src/consumer/consumer.js';
import { pruneEveryEventsForTests } from '../../src/consumer/ledgerPruner.js';
import type { EventStore } from '../../src/core/eventStore.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { sqliteTarget } from '../../src/sqlite/target.js';
import { randomConsumer, randomStream, tempDir } from '../support/index.js';
import { idem, json } from './cli.js';

/** The consumers here prune every `EVERY` handled events, a tenth of `PRUNE_EVERY_EVENTS`. */
const EVERY = 500;

describe('idem consumer prune-ledger', () => {
  let restore: () => void = () => undefined;
  before(() => {
    restore = pruneEveryEventsForTests(EVERY);
  });
  after(() => restore());

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

  it('a target restored from an older backup: prune-ledger reports its horizon, then the reset to its checkpoint is allowed; nothing lost or doubled', async () => {
    const dir = tempDir();
    try {
      const db = dir.file('idem.db');
      const targetDb = dir.file('target.db');
      const name = randomConsumer('sums');
      const streams = [randomStream('invoice'), randomStream('invoice')];
      /** Runs the consumer (retain: 'checkpoint') to the head; returns the events it counted. */
      const run = async (store: EventStore): Promise<number> => {
        const target = sqliteTarget(targetDb);
        try {
          target.db.exec('CREATE TABLE IF NOT EXISTS sums (stream TEXT PRIMARY KEY, n INTEGER NOT NULL)');
          const c = createConsumer({
            name,
            source: store,
            target,
            ledger: { retain: 'checkpoint' },
            handle: (e, ctx) => {
              ctx.tx
                .prepare('INSERT INTO sums VALUES (?, 1) ON CONFLICT (stream) DO UPDATE SET n = n + 1')
                .run(e.stream);
            },
          });
          await c.start();
          await c.whenCaughtUp();
          await c.stop();
          return target.db.prepare('SELECT coalesce(sum(n), 0) FROM sums').pluck().get() as number;
        } finally {
          await target.close();
        }
      };
      const append = async (store: EventStore, n: number): Promise<void> => {
        for (let i = 0; i < n; i += 50)
          await store.append(
            streams[(i / 50) % 2]!,
            Array.from({ length: 50 }, () => ({ type: 'invoice.issued', data: {} })),
          );
      };
      const older = 100;
      const total = older + EVERY;
      let store = await openSqliteStore({ path: db });
      try {
        await append(store, older);
        assert.equal(await run(store), older);
        // The target's backup, taken at checkpoint `older`, before any prune.
        copyFileSync(targetDb, dir.file('target-backup.db'));
        await append(store, EVERY);
        assert.equal(await run(store), total);
      } finally {
        await store.close();
      }
      copyFileSync(dir.file('target-backup.db'), targetDb);

      // The store's horizon is the newer target's: the reset to the restored checkpoint is refused.
      const refused = await idem(['consumer', 'reset', name, '--to', String(older), '--db', db]);
      assert.equal(refused.code, 2, refused.stderr);
      assert.match(refused.stderr, new RegExp(`at least ${total} `));
      const pruned = await idem([
        'consumer',
        'prune-ledger',
        name,
        '--db',
        db,
        '--target-db',
        targetDb,
        '--json',
      ]);
      assert.equal(pruned.code, 0, pruned.stderr);
      assert.deepEqual(json(pruned), { consumer: name, deleted: older, horizon: older });
      const reset = await idem(['consumer', 'reset', name, '--to', String(older), '--db', db]);
      assert.equal(reset.code, 0, reset.stderr);

      store = await openSqliteStore({ path: db });
      try {
        assert.equal(await run(store), total, 'every event counted once in the restored target');
      } finally {
        await store.close();
      }
    } finally {
      await dir.cleanup();
    }
  });
});
