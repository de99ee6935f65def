// SQLite-specific options of the embedded store: durability pragmas, bad options, reopening a file,
// and the whole EventStore suite again with tiny read pages (page boundaries everywhere).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { STORE_MIGRATIONS } from '../../src/sqlite/migrations.js';
import { openSqliteStore, type SqliteStoreOptions } from '../../src/sqlite/sqliteStore.js';
import { variants } from '../support/fast.js';
import { randomStream } from '../support/names.js';
import { tempDir } from '../support/tempDir.js';
import { describeEventStore } from './eventStore.suite.js';
import { collect, events, rejectsWith } from './suite/context.js';

describe('SQLite store options', () => {
  for (const [durability, synchronous] of [
    [undefined, 2],
    ['full', 2],
    ['normal', 1],
  ] as const) {
    it(`durability ${durability ?? '(default)'} runs in WAL mode with synchronous=${synchronous === 2 ? 'FULL' : 'NORMAL'}`, async () => {
      const dir = tempDir();
      try {
        const store = await openSqliteStore({
          path: dir.file('d.db'),
          ...(durability ? { durability } : {}),
        });
        try {
          assert.equal(store.db.pragma('journal_mode', { simple: true }), 'wal');
          assert.equal(store.db.pragma('synchronous', { simple: true }), synchronous);
          assert.equal(store.durability, durability ?? 'full');
        } finally {
          await store.close();
        }
      } finally {
        await dir.cleanup();
      }
    });
  }

  for (const [what, options, field] of [
    ['an empty path', { path: '' }, 'path'],
    ['an unknown durability', { durability: 'fast' }, 'durability'],
    ['readPageSize 0', { readPageSize: 0 }, 'readPageSize'],
    ['readPageSize 2.5', { readPageSize: 2.5 }, 'readPageSize'],
  ] as const) {
    it(`${what} is invalid_input naming ${field}`, async () => {
      const dir = tempDir();
      try {
        const opts = Object.assign({ path: dir.file('x.db') }, options) as unknown as SqliteStoreOptions;
        await rejectsWith(
          (async () => {
            const store = await openSqliteStore(opts);
            await store.close();
          })(),
          'invalid_input',
          field,
        );
      } finally {
        await dir.cleanup();
      }
    });
  }

  it('creates the directory of a new file, and reopening keeps the events without migrating again', async () => {
    const dir = tempDir();
    const file = dir.file('nested/deeper/events.db');
    try {
      const stream = randomStream();
      const first = await openSqliteStore({ path: file });
      await first.append(stream, events(3));
      const applied = first.db.prepare('SELECT version, applied_at FROM idem_schema ORDER BY version').all();
      await first.close();
      assert.ok(existsSync(file));
      const again = await openSqliteStore({ path: file, durability: 'normal' });
      try {
        assert.deepEqual(
          again.db.prepare('SELECT version, applied_at FROM idem_schema ORDER BY version').all(),
          applied,
        );
        assert.equal(applied.length, STORE_MIGRATIONS.length);
        const r = await again.append(stream, events(1), { expectedVersion: 3 });
        assert.deepEqual([r.version, r.firstPosition], [4, 4]);
        assert.deepEqual(
          (await collect(again.readStream(stream))).map((e) => e.version),
          [1, 2, 3, 4],
        );
      } finally {
        await again.close();
      }
    } finally {
      await dir.cleanup();
    }
  });

  it('a private in-memory database (:memory:) works as a store', async () => {
    const store = await openSqliteStore({ path: ':memory:' });
    try {
      const r = await store.append(randomStream(), events(2));
      assert.equal(r.lastPosition, 2);
      assert.equal(await store.headPosition(), 2);
    } finally {
      await store.close();
    }
  });
});

// The inner loop (`npm run test:fast`) runs the smallest page only.
for (const readPageSize of variants([1, 3])) {
  describeEventStore(
    `sqlite (readPageSize ${readPageSize})`,
    async ({ limits, upcasters } = {}) => {
      const dir = tempDir();
      const store = await openSqliteStore({
        path: dir.file('paged.db'),
        readPageSize,
        ...(limits ? { limits } : {}),
        ...(upcasters ? { upcasters } : {}),
      });
      return {
        store,
        cleanup: async () => {
          await store.close();
          await dir.cleanup();
        },
      };
    },
    { largeReadEvents: 3000, cartItems: 10 },
  );
}
