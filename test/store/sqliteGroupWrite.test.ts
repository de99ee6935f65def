// Writes that share the SQLite store's group commit (subscription acks use them): they run inside the
// transaction of the appends queued with them, each in its own savepoint, and resolve after its commit.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import type { RecordedEvent } from '../../src/core/event.js';
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

// Between groups a store keeps the head and the versions of the streams it appended to, and trusts
// them only while no other connection has committed to the file (PRAGMA data_version).
describe('SQLite group commit: versions kept between groups', () => {
  it('sees appends that another connection committed in between (two stores on one file)', async () => {
    const dir = tempDir();
    const a = await openSqliteStore({ path: dir.file('v.db') });
    const b = await openSqliteStore({ path: dir.file('v.db') });
    try {
      const r1 = await a.append('s-1', [{ type: 't', data: { by: 'a' } }]);
      assert.deepEqual([r1.version, r1.lastPosition], [1, 1]);
      const r2 = await b.append('s-1', [
        { type: 't', data: { by: 'b' } },
        { type: 't', data: { by: 'b' } },
      ]);
      assert.deepEqual([r2.version, r2.lastPosition], [3, 3]);
      // a knew s-1 at version 1 and the head at 1: both changed under it.
      await rejectsWrongVersion(a.append('s-1', [{ type: 't', data: {} }], { expectedVersion: 1 }));
      const r3 = await a.append('s-1', [{ type: 't', data: { by: 'a' } }], { expectedVersion: 3 });
      assert.deepEqual([r3.version, r3.firstPosition], [4, 4]);
      const r4 = await a.append('s-2', [{ type: 't', data: {} }]);
      assert.equal(r4.firstPosition, 5);
      assert.deepEqual(
        (await collectAll(b)).map((e) => [e.stream, e.version, e.position]),
        [
          ['s-1', 1, 1],
          ['s-1', 2, 2],
          ['s-1', 3, 3],
          ['s-1', 4, 4],
          ['s-2', 1, 5],
        ],
      );
    } finally {
      await a.close();
      await b.close();
      await dir.cleanup();
    }
  });

  it('forgets what a rolled-back group wrote (a duplicate id in the group reruns it with savepoints)', async () => {
    const dir = tempDir();
    const store = await openSqliteStore({ path: dir.file('r.db') });
    try {
      const first = await store.append('s-1', [
        { id: '0190a8a0-0000-7000-8000-000000000001', type: 't', data: { n: 1 } },
      ]);
      assert.equal(first.version, 1);
      // One group: a new append to s-1, then an append that reuses the stored id with other content.
      const [ok, conflict] = await Promise.allSettled([
        store.append('s-1', [{ type: 't', data: { n: 2 } }]),
        store.append('s-2', [{ id: '0190a8a0-0000-7000-8000-000000000001', type: 't', data: { n: 99 } }]),
      ]);
      assert.equal(ok.status, 'fulfilled');
      assert.equal(conflict.status, 'rejected');
      assert.equal((ok as PromiseFulfilledResult<{ version: number }>).value.version, 2);
      const next = await store.append('s-1', [{ type: 't', data: { n: 3 } }], { expectedVersion: 2 });
      assert.deepEqual([next.version, next.firstPosition], [3, 3]);
      const s2 = await store.append('s-2', [{ type: 't', data: {} }], { expectedVersion: 'no_stream' });
      assert.equal(s2.version, 1);
    } finally {
      await store.close();
      await dir.cleanup();
    }
  });
});

describe('SQLite group commit: the rows of a group go in together', () => {
  it('a retry in the same group as the append it repeats is its duplicate, even with a stale expected version', async () => {
    const dir = tempDir();
    const store = await openSqliteStore({ path: dir.file('d.db') });
    try {
      const event = { id: '0190a8a0-0000-7000-8000-0000000000aa', type: 't', data: { n: 1 } };
      // One group: the first append's rows are decided but not yet inserted when the second is.
      const [first, retry] = await Promise.all([
        store.append('acct-1', [event], { expectedVersion: 0 }),
        store.append('acct-1', [event], { expectedVersion: 'no_stream' }),
      ]);
      assert.deepEqual([first.duplicate, first.version, first.firstPosition], [false, 1, 1]);
      assert.deepEqual(
        [retry.duplicate, retry.version, retry.firstPosition, retry.ids],
        [true, 1, 1, [event.id]],
      );
      assert.equal(count(store.db), 1);
    } finally {
      await store.close();
      await dir.cleanup();
    }
  });

  it('many appends of one group (every statement size, several per stream) get contiguous positions and versions', async () => {
    const dir = tempDir();
    const store = await openSqliteStore({ path: dir.file('m.db') });
    try {
      // 101 appends of 1 to 3 events to 7 streams, all queued in one turn: 203 rows in one group.
      const sizes = Array.from({ length: 101 }, (_, i) => 1 + (i % 3));
      const results = await Promise.all(
        sizes.map((n, i) =>
          store.append(
            `s-${i % 7}`,
            Array.from({ length: n }, (_, j) => ({ type: 't', data: { i, j } })),
          ),
        ),
      );
      let position = 0;
      const versions = new Map<string, number>();
      results.forEach((r, i) => {
        const stream = `s-${i % 7}`;
        const before = versions.get(stream) ?? 0;
        assert.deepEqual(
          [r.stream, r.firstPosition, r.lastPosition, r.version, r.ids.length],
          [stream, position + 1, position + sizes[i]!, before + sizes[i]!, sizes[i]],
        );
        position += sizes[i]!;
        versions.set(stream, before + sizes[i]!);
      });
      for (const [stream, version] of versions) assert.equal(await store.streamVersion(stream), version);
      const events: RecordedEvent[] = [];
      for await (const e of store.readAll()) events.push(e);
      assert.equal(events.length, position);
      events.forEach((e, k) => assert.equal(e.position, k + 1));
      // Row k holds the data of its own append: the fill walked the appends in order.
      let k = 0;
      sizes.forEach((n, i) => {
        for (let j = 0; j < n; j++, k++) {
          assert.deepEqual(
            [events[k]!.stream, events[k]!.data, events[k]!.id],
            [`s-${i % 7}`, { i, j }, results[i]!.ids[j]],
          );
        }
      });
    } finally {
      await store.close();
      await dir.cleanup();
    }
  });
});

async function rejectsWrongVersion(p: Promise<unknown>): Promise<void> {
  await assert.rejects(p, { code: 'wrong_expected_version' });
}

async function collectAll(
  store: SqliteEventStore,
): Promise<{ stream: string; version: number; position: number }[]> {
  const out: { stream: string; version: number; position: number }[] = [];
  for await (const e of store.readAll()) out.push(e);
  return out;
}
