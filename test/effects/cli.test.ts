// The `idem effects` and `idem consumer rebuild|promote|versions|reset-ledger` verbs, in-process on SQLite files.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { createConsumer } from '../../src/consumer/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { sqliteTarget } from '../../src/sqlite/target.js';
import { idemInProcess } from '../cli/inProcess.js';
import { tempDir } from '../support/tempDir.js';
import { writeInvoiceStore } from '../support/invoiceStore.js';
import pg from 'pg';
import { postgresTarget } from '../../src/postgres/target.js';
import { createTempDatabase } from '../support/postgres.js';
import { requireOrSkip } from '../support/services.js';
import type { EffectRecord } from '../../src/core/effectTypes.js';

const PROJECTION = fileURLToPath(new URL('./fixtures/projection.ts', import.meta.url));
const BATCH_PROJECTION = fileURLToPath(new URL('./fixtures/projectionBatch.ts', import.meta.url));

describe('idem effects and consumer versions (CLI)', () => {
  it('lists and retries effects, refuses reset-ledger without --yes, rebuilds, and promotes only a caught-up version', async () => {
    const dir = tempDir();
    const db = dir.file('store.db');
    const tdb = dir.file('target.db');
    const store = await openSqliteStore({ path: db });
    const target = sqliteTarget(tdb);
    const consumer = createConsumer({
      name: 'mailer_v1',
      source: store,
      target,
      filter: { types: ['invoice.issued'] },
      effects: { liveFrom: 'start' },
      handle: async (e, ctx) => {
        await ctx.effect('send-receipt', { id: e.id });
      },
    });
    const t = ['--target-db', tdb];
    try {
      for (let i = 1; i <= 3; i++)
        await store.append(`invoice-${i}`, [{ type: 'invoice.issued', data: { i } }]);
      await consumer.start();
      await consumer.whenCaughtUp({ timeoutMs: 10_000 });
      await consumer.stop();
      await target.close();

      let r = await idemInProcess(['effects', 'list', ...t, '--json']);
      assert.equal(r.code, 0, r.stderr);
      const rows = JSON.parse(r.stdout) as EffectRecord[];
      assert.equal(rows.length, 3);
      assert.ok(rows.every((row) => row.status === 'pending' && row.idempotencyKey.startsWith('mailer/')));
      r = await idemInProcess(['effects', 'list', ...t]);
      assert.match(r.stdout, /ID\s+KIND\s+STATUS/);
      assert.match(r.stderr, /pending 3, done 0, failed 0, suppressed 0/);

      assert.equal((await idemInProcess(['effects', 'list', ...t, '--status', 'bogus'])).code, 2);
      assert.equal((await idemInProcess(['effects', 'list'])).code, 2, 'a target is required');
      assert.equal(
        (await idemInProcess(['effects', 'retry', ...t])).code,
        2,
        'an id or --all-failed is required',
      );
      r = await idemInProcess(['effects', 'retry', rows[0]!.idempotencyKey, ...t]);
      assert.equal(r.code, 1, 'a pending effect is not retryable');
      assert.match(r.stderr, /not_found/);
      r = await idemInProcess(['effects', 'retry', '--all-failed', ...t, '--json']);
      assert.deepEqual(JSON.parse(r.stdout), { retried: 0 });

      r = await idemInProcess(['consumer', 'reset-ledger', 'mailer_v1', ...t]);
      assert.equal(r.code, 2);
      assert.match(r.stderr, /re-applies everything.*--yes/);
      r = await idemInProcess(['consumer', 'reset-ledger', 'mailer_v1', ...t, '--yes', '--json']);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(JSON.parse(r.stdout), {
        consumer: 'mailer_v1',
        ledgerRows: 3,
        checkpoints: 1,
        entityVersions: 0,
      });

      r = await idemInProcess([
        'consumer',
        'rebuild',
        'mailer_v1',
        '--as',
        'mailer_v2',
        '--module',
        PROJECTION,
        '--db',
        db,
        ...t,
        '--json',
      ]);
      assert.equal(r.code, 0, r.stderr);
      const progress = JSON.parse(r.stdout) as {
        caughtUp: boolean;
        position: number;
        head: number;
        name: string;
      };
      assert.deepEqual(
        [progress.name, progress.caughtUp, progress.position, progress.head],
        ['mailer_v2', true, 3, 3],
      );
      r = await idemInProcess(['effects', 'list', ...t, '--json']);
      assert.equal(
        (JSON.parse(r.stdout) as EffectRecord[]).length,
        3,
        'the rebuild wrote no new effect (shared scope)',
      );

      await store.append('invoice-4', [{ type: 'invoice.issued', data: { i: 4 } }]);
      r = await idemInProcess(['consumer', 'promote', 'mailer_v2', '--db', db, ...t]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /unavailable: consumer "mailer_v2" has not caught up/);
      r = await idemInProcess([
        'consumer',
        'rebuild',
        'mailer_v1',
        '--as',
        'mailer_v2',
        '--module',
        PROJECTION,
        '--db',
        db,
        ...t,
      ]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /mailer_v2: position 4\/4, .*caught up/);
      r = await idemInProcess(['consumer', 'promote', 'mailer_v2', '--db', db, ...t]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /mailer_v2 is now the active version of mailer/);
      r = await idemInProcess(['consumer', 'versions', ...t, '--json']);
      const v = JSON.parse(r.stdout) as {
        versions: { consumer: string; rebuildOf: string | null; liveFrom: number }[];
        active: { consumer: string }[];
      };
      assert.deepEqual(
        v.versions.map((x) => [x.consumer, x.rebuildOf, x.liveFrom]),
        [
          ['mailer_v1', null, 0],
          ['mailer_v2', 'mailer_v1', 3],
        ],
      );
      assert.deepEqual(
        v.active.map((a) => a.consumer),
        ['mailer_v2'],
      );
      r = await idemInProcess(['effects', 'list', ...t, '--json']);
      const after = JSON.parse(r.stdout) as EffectRecord[];
      assert.deepEqual(
        after.map((x) => x.status),
        ['pending', 'pending', 'pending', 'pending'],
        "the new event's effect is live for v2",
      );
    } finally {
      await consumer.stop();
      await target.close();
      await store.close();
      await dir.cleanup();
    }
  });
});

describe('idem consumer rebuild with a batch handler (CLI)', () => {
  it('rebuilds from a module that exports handleBatch instead of handle', async () => {
    const dir = tempDir();
    const db = dir.file('store.db');
    const tdb = dir.file('target.db');
    try {
      await writeInvoiceStore(db, 3);
      const t = ['--target-db', tdb];
      const r = await idemInProcess([
        'consumer',
        'rebuild',
        'mailer_v1',
        '--as',
        'mailer_v2',
        '--module',
        BATCH_PROJECTION,
        '--db',
        db,
        ...t,
        '--json',
      ]);
      assert.equal(r.code, 0, r.stderr);
      const progress = JSON.parse(r.stdout) as { caughtUp: boolean; position: number; name: string };
      assert.deepEqual([progress.name, progress.caughtUp, progress.position], ['mailer_v2', true, 3]);
      const target = sqliteTarget(tdb);
      try {
        const n = target.db.prepare('SELECT count(*) AS n FROM invoices_v2').get() as { n: number };
        assert.equal(n.n, 3);
        assert.equal(await target.ledgerSize('mailer_v2'), 3);
      } finally {
        await target.close();
      }
    } finally {
      await dir.cleanup();
    }
  });
});

const pgSkip = await requireOrSkip('postgres');

describe('idem effects on a PostgreSQL target (CLI)', { skip: pgSkip }, () => {
  it('lists effects and clears a ledger through --target-postgres and --target-schema', async () => {
    const dir = tempDir();
    const tdb = await createTempDatabase('idem_effects_cli');
    const pool = new pg.Pool({ connectionString: tdb.connectionString, max: 4 });
    const store = await openSqliteStore({ path: dir.file('store.db') });
    const target = postgresTarget(pool, { schema: 'billing_target' });
    const consumer = createConsumer({
      name: 'pgmailer_v1',
      source: store,
      target,
      effects: { liveFrom: 'start' },
      handle: async (e, ctx) => {
        await ctx.effect('send-receipt', { id: e.id });
      },
    });
    const t = ['--target-postgres', tdb.connectionString, '--target-schema', 'billing_target'];
    try {
      await store.append('invoice-1', [{ type: 'invoice.issued', data: {} }]);
      await consumer.start();
      await consumer.whenCaughtUp({ timeoutMs: 10_000 });
      await consumer.stop();
      let r = await idemInProcess(['effects', 'list', ...t, '--json']);
      assert.equal(r.code, 0, r.stderr);
      const rows = JSON.parse(r.stdout) as EffectRecord[];
      assert.deepEqual(
        rows.map((x) => [x.idempotencyKey.split('/')[0], x.kind, x.status]),
        [['pgmailer', 'send-receipt', 'pending']],
      );
      r = await idemInProcess(['consumer', 'reset-ledger', 'pgmailer_v1', ...t, '--yes', '--json']);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(JSON.parse(r.stdout), {
        consumer: 'pgmailer_v1',
        ledgerRows: 1,
        checkpoints: 1,
        entityVersions: 0,
      });
      assert.equal(await target.ledgerSize('pgmailer_v1'), 0);
    } finally {
      await consumer.stop();
      await store.close();
      await pool.end();
      await tdb.drop();
      await dir.cleanup();
    }
  });
});
