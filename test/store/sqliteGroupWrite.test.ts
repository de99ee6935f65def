// Writes that share the SQLite store's group commit (subscription acks use them): they run inside the
// transaction of the appends queued with them, each in its own savepoint, and resolve after its commit.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import type { AppendBatcher } from '../../src/sqlite/appendBatcher.js';
import { openSqliteStore, type SqliteEventStore } from '../../src/sqlite/sqliteStore.js';
import { tempDir } from '../support/tempDir.js';

function batcherOf(store: SqliteEventStore): AppendBatcher {
  return (store as unknown as { batcher: AppendBatcher }).batcher;
}

const count = (db: Database.Database): number =>
  (db.prepare('SELECT count(*) AS n FROM idem_events').get() as { n: number }).n;

describe('SQLite group commit: writes queued with appends', () => {
  it('runs in the transaction of the appends queued in the same turn, and resolves once it committed', async () => {
    const dir = tempDir();
    const store = await openSqliteStore({ path: dir.file('g.db') });
    const other = new Database(dir.file('g.db'), { readonly: true });
    try {
      const appends = [1, 2, 3].map((i) => store.append(`s-${i}`, [{ type: 't', data: { i } }]));
      let seenInside = -1;
      let seenByOther = -1;
      const write = batcherOf(store).enqueueWrite(() => {
        // Inside the group transaction: the appends are written but not committed yet.
        seenInside = count(store.db);
        seenByOther = count(other);
        return 'done';
      });
      assert.equal(await write, 'done');
      assert.equal(seenInside, 3, 'the write ran after the appends of its group, in their transaction');
      assert.equal(seenByOther, 0, 'nothing was committed before the group commit');
      assert.equal(count(other), 3, 'the appends and the write committed when the write resolved');
      await Promise.all(appends);
    } finally {
      other.close();
      await store.close();
      await dir.cleanup();
    }
  });

  it('a write that throws rolls back its own changes only; the appends of its group commit', async () => {
    const dir = tempDir();
    const store = await openSqliteStore({ path: dir.file('g.db') });
    try {
      store.db.exec('CREATE TABLE side (n INTEGER)');
      const append = store.append('s', [{ type: 't', data: {} }]);
      const failing = batcherOf(store).enqueueWrite(() => {
        store.db.prepare('INSERT INTO side (n) VALUES (1)').run();
        throw new Error('boom');
      });
      const ok = batcherOf(store).enqueueWrite(
        () => store.db.prepare('INSERT INTO side (n) VALUES (2)').run().changes,
      );
      await assert.rejects(failing, /boom/);
      assert.equal(await ok, 1);
      assert.equal((await append).version, 1);
      assert.deepEqual(
        store.db.prepare('SELECT n FROM side ORDER BY n').pluck().all(),
        [2],
        "the failing write's insert was rolled back, the other write's kept",
      );
      assert.equal(count(store.db), 1);
    } finally {
      await store.close();
      await dir.cleanup();
    }
  });

  it("a subscription's ack goes through the group commit, and survives reopening the file", async () => {
    const dir = tempDir();
    const path = dir.file('g.db');
    let store = await openSqliteStore({ path });
    try {
      for (let i = 0; i < 5; i++) await store.append('s', [{ type: 't', data: { i } }]);
      const batcher = batcherOf(store);
      const enqueueWrite = batcher.enqueueWrite.bind(batcher);
      let grouped = 0;
      batcher.enqueueWrite = <T>(fn: () => T): Promise<T> => {
        grouped++;
        return enqueueWrite(fn);
      };
      const sub = await store.subscribe('c_v1');
      const it = sub[Symbol.asyncIterator]();
      let delivered = 0;
      while (delivered < 5) {
        const m = await it.next();
        if (!m.done && m.value.kind === 'events') delivered += m.value.events.length;
      }
      await sub.ack(5);
      assert.equal(grouped, 1, 'the ack was written through the group commit');
      await sub.close();
      await store.close();
      store = await openSqliteStore({ path });
      const info = await store.consumers.get('c_v1');
      assert.equal(info.position, 5);
    } finally {
      await store.close();
      await dir.cleanup();
    }
  });
});
