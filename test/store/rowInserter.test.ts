// RowInserter: many rows through prepared multi-row INSERTs of several sizes, in order, with the table's checks.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { RowInserter } from '../../src/sqlite/rowInserter.js';

function table(): Database.Database {
  const db = new Database(':memory:');
  db.exec('CREATE TABLE t (k INTEGER PRIMARY KEY, a TEXT NOT NULL, b INTEGER NOT NULL)');
  return db;
}

describe('RowInserter', () => {
  it('inserts every count from 0 to 150 rows, in order, with each row its own values', () => {
    const db = table();
    const inserter = new RowInserter(db, 'INSERT INTO t (k, a, b)', 3);
    let next = 0;
    for (let count = 0; count <= 150; count++) {
      const first = next;
      inserter.insert(count, (params, at, i) => {
        params[at] = first + i;
        params[at + 1] = `row-${first + i}`;
        params[at + 2] = count;
      });
      next += count;
      const rows = db.prepare('SELECT k, a, b FROM t WHERE k >= ? ORDER BY rowid').raw().all(first) as [
        number,
        string,
        number,
      ][];
      assert.deepEqual(
        rows,
        Array.from({ length: count }, (_, i) => [first + i, `row-${first + i}`, count]),
        `${count} rows`,
      );
    }
    assert.equal(db.prepare('SELECT count(*) FROM t').pluck().get(), next);
    db.close();
  });

  it('a row that breaks a constraint throws, and a transaction around it rolls back every row', () => {
    const db = table();
    const inserter = new RowInserter(db, 'INSERT INTO t (k, a, b)', 3);
    inserter.insert(1, (params, at) => {
      params[at] = 70;
      params[at + 1] = 'stored';
      params[at + 2] = 0;
    });
    const insertAll = db.transaction(() =>
      inserter.insert(100, (params, at, i) => {
        params[at] = i; // k = 70 is taken
        params[at + 1] = 'new';
        params[at + 2] = 1;
      }),
    );
    assert.throws(insertAll, { code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
    assert.deepEqual(db.prepare('SELECT k, a FROM t').raw().all(), [[70, 'stored']]);
    db.close();
  });
});
