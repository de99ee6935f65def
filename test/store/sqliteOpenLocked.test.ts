// Opening a file while another connection holds its write lock. SQLite answers some of these lock
// waits with SQLITE_BUSY at once, without calling the busy handler (switching a rollback-mode file to
// WAL while another connection holds RESERVED): several processes opening one new file together hit
// exactly this. The store and the target must wait for the lock like any other write, not fail.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { sqliteTarget } from '../../src/sqlite/target.js';
import { tempDir } from '../support/tempDir.js';

const HOLD_MS = 300;

/** Another thread takes the write lock of `file` (BEGIN IMMEDIATE), holds it `holdMs`, then commits. */
async function holdWriteLock(file: string, holdMs = HOLD_MS): Promise<{ released: Promise<number> }> {
  const worker = new Worker(
    `const Database = require('better-sqlite3');
     const { parentPort, workerData } = require('node:worker_threads');
     const db = new Database(workerData.file);
     db.exec('BEGIN IMMEDIATE');
     parentPort.postMessage('locked');
     setTimeout(() => { db.exec('COMMIT'); db.close(); parentPort.postMessage(Date.now()); }, workerData.holdMs);`,
    { eval: true, workerData: { file, holdMs } },
  );
  const messages: unknown[] = [];
  let wake: () => void = () => undefined;
  worker.on('message', (m) => {
    messages.push(m);
    wake();
  });
  const next = async (): Promise<unknown> => {
    while (messages.length === 0) await new Promise<void>((r) => (wake = r));
    return messages.shift();
  };
  assert.equal(await next(), 'locked');
  return {
    released: (async () => {
      const at = (await next()) as number;
      await worker.terminate();
      return at;
    })(),
  };
}

/** A file in rollback-journal mode (as SQLite creates it) with one table: not yet switched to WAL. */
function rollbackModeFile(file: string): void {
  const db = new Database(file);
  db.exec('CREATE TABLE other (x)');
  assert.equal(db.pragma('journal_mode', { simple: true }), 'delete');
  db.close();
}

describe('SQLite: opening a file whose write lock another connection holds', () => {
  it('plain better-sqlite3 fails at once here, whatever its busy timeout (the case this guards)', async () => {
    const dir = tempDir();
    try {
      const file = dir.file('raw.db');
      rollbackModeFile(file);
      const lock = await holdWriteLock(file);
      const db = new Database(file, { timeout: 5_000 });
      try {
        assert.throws(() => db.pragma('journal_mode = WAL'), { code: 'SQLITE_BUSY' });
      } finally {
        db.close();
        await lock.released;
      }
    } finally {
      await dir.cleanup();
    }
  });

  it('the store waits for the lock, then opens in WAL mode and appends', async () => {
    const dir = tempDir();
    try {
      const file = dir.file('store.db');
      rollbackModeFile(file);
      const lock = await holdWriteLock(file);
      const store = await openSqliteStore({ path: file, busyTimeoutMs: 5_000 });
      const openedAt = Date.now();
      try {
        assert.ok(openedAt >= (await lock.released), 'opened only once the other connection let go');
        assert.equal(store.db.pragma('journal_mode', { simple: true }), 'wal');
        const r = await store.append('s-1', [{ type: 't', data: {} }]);
        assert.equal(r.version, 1);
      } finally {
        await store.close();
      }
    } finally {
      await dir.cleanup();
    }
  });

  it('the consumer target waits for the lock too', async () => {
    const dir = tempDir();
    try {
      const file = dir.file('target.db');
      rollbackModeFile(file);
      const lock = await holdWriteLock(file);
      const target = sqliteTarget(file, { busyTimeoutMs: 5_000 });
      const openedAt = Date.now();
      try {
        assert.ok(openedAt >= (await lock.released), 'opened only once the other connection let go');
        assert.equal(target.db.pragma('journal_mode', { simple: true }), 'wal');
      } finally {
        await target.close();
      }
    } finally {
      await dir.cleanup();
    }
  });

  it('gives up with SQLITE_BUSY once its busy timeout has passed', async () => {
    const dir = tempDir();
    try {
      const file = dir.file('late.db');
      rollbackModeFile(file);
      const lock = await holdWriteLock(file);
      try {
        await assert.rejects(openSqliteStore({ path: file, busyTimeoutMs: 50 }), { code: 'SQLITE_BUSY' });
      } finally {
        await lock.released;
      }
    } finally {
      await dir.cleanup();
    }
  });

  it('a store and a target already at their latest schema open without the write lock, and read', async () => {
    const dir = tempDir();
    try {
      const storeFile = dir.file('current.db');
      const targetFile = dir.file('current-target.db');
      const first = await openSqliteStore({ path: storeFile });
      await first.append('s-1', [{ type: 't', data: { n: 1 } }]);
      await first.close();
      const firstTarget = sqliteTarget(targetFile);
      await firstTarget.ledgerSize('c_v1'); // the target makes its schema on first use
      await firstTarget.close();
      // Held far longer than the busy timeouts below: a process frozen inside a write transaction.
      const storeLock = await holdWriteLock(storeFile, 2_000);
      const targetLock = await holdWriteLock(targetFile, 2_000);
      try {
        const store = await openSqliteStore({ path: storeFile, busyTimeoutMs: 50 });
        const target = sqliteTarget(targetFile, { busyTimeoutMs: 50 });
        try {
          assert.equal(await store.headPosition(), 1);
          assert.equal(await target.ledgerSize('c_v1'), 0);
        } finally {
          await target.close();
          await store.close();
        }
        const openedBy = Date.now();
        assert.ok(
          openedBy < (await storeLock.released),
          'opened and read while the other connection held the lock',
        );
      } finally {
        await storeLock.released;
        await targetLock.released;
      }
    } finally {
      await dir.cleanup();
    }
  });
});
