import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { runMigrations } from '../../src/sqlite/migrations.js';
import { sqliteTarget } from '../../src/sqlite/target.js';
import { TARGET_MIGRATIONS, TARGET_SCHEMA_TABLE } from '../../src/sqlite/targetMigrations.js';
import { tempDir } from '../support/tempDir.js';
import { makeSqliteFixture } from './support/targetFixture.js';
import { describeConsumer } from './consumer.suite.js';

describeConsumer('sqlite target', makeSqliteFixture);

describe('sqlite target schema', () => {
  it('moves a version 2 ledger (consumer names, timestamps) into the ledger keyed by consumer id, keeping every row', async () => {
    const dir = tempDir();
    try {
      const path = dir.file('target.db');
      // A target file as releases before migration 3 left it, with ledger rows of two consumers.
      const old = new Database(path);
      runMigrations(
        old,
        TARGET_MIGRATIONS.filter((m) => m.version <= 2),
        TARGET_SCHEMA_TABLE,
      );
      const insert = old.prepare(
        'INSERT INTO idem_processed (consumer, key, position, processed_at) VALUES (?, ?, ?, ?)',
      );
      for (let i = 1; i <= 300; i++) insert.run('billing_v1', `event:${i}`, i, '2026-12-01T00:00:00.000Z');
      for (let i = 1; i <= 5; i++)
        insert.run('audit_v1', `command:${i}`, 1000 + i, '2026-12-01T00:00:00.000Z');
      old.close();

      const target = sqliteTarget(path);
      try {
        await target.migrate();
        assert.equal(await target.ledgerSize('billing_v1'), 300);
        assert.equal(await target.ledgerSize('audit_v1'), 5);
        assert.equal(await target.ledgerSize('nobody'), 0);
        const keys = ['event:1', 'event:300', 'event:301', 'command:1'];
        const found = await target.transaction(async (t) => ({
          billing: [...(await t.processedKeys('billing_v1', keys))].sort(),
          audit: [...(await t.processedKeys('audit_v1', keys))].sort(),
        }));
        assert.deepEqual(found, { billing: ['event:1', 'event:300'], audit: ['command:1'] });
        const db = target.db;
        assert.equal(
          db.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'idem_processed'").pluck().get(),
          0,
        );
        assert.deepEqual(
          db
            .prepare(
              'SELECT position FROM idem_ledger JOIN idem_target_consumers c ON c.id = consumer_id WHERE c.consumer = ? AND key = ?',
            )
            .pluck()
            .get('audit_v1', 'command:5'),
          1005,
        );
        // New rows go on after the moved ones, for old and new consumers.
        await target.transaction(async (t) => {
          await t.record('billing_v1', {
            entries: [{ key: 'event:301', position: 301 }],
            versions: new Map(),
            position: 301,
            epoch: 1,
          });
          await t.record('new_v1', {
            entries: [{ key: 'event:1', position: 1 }],
            versions: new Map(),
            position: 1,
            epoch: 1,
          });
        });
        assert.equal(await target.ledgerSize('billing_v1'), 301);
        assert.equal(await target.ledgerSize('new_v1'), 1);
        assert.equal(
          db.prepare(`SELECT max(version) FROM ${TARGET_SCHEMA_TABLE}`).pluck().get(),
          TARGET_MIGRATIONS.at(-1)!.version,
        );
      } finally {
        await target.close();
      }
    } finally {
      await dir.cleanup();
    }
  });
});
