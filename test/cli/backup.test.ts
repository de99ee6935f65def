import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { RecordedEvent } from '../../src/core/event.js';
import { backupSqliteStore, openSqliteStore, type SqliteEventStore } from '../../src/sqlite/index.js';
import { tempDir, type TempDir } from '../support/index.js';
import { idem, json } from './cli.js';

async function readAllOf(path: string): Promise<RecordedEvent[]> {
  const store = await openSqliteStore({ path });
  try {
    const out: RecordedEvent[] = [];
    for await (const e of store.readAll()) out.push(e);
    return out;
  } finally {
    await store.close();
  }
}

describe('idem backup and idem restore (real processes, SQLite files)', () => {
  let dir: TempDir;
  let store: SqliteEventStore;
  let source: string;

  before(async () => {
    dir = tempDir();
    source = dir.file('store.db');
    store = await openSqliteStore({ path: source });
    for (let i = 0; i < 40; i++)
      await store.append(
        `cart-${i}`,
        Array.from({ length: 250 }, (_, j) => ({ type: 'item.added', data: { i, j, pad: 'x'.repeat(200) } })),
      );
  });
  after(async () => {
    await store.close();
    await dir.cleanup();
  });

  it('backs up a consistent snapshot while events are appended, which idem verify accepts', async () => {
    let appending = true;
    let appended = 0;
    const appender = (async () => {
      while (appending) {
        await store.append(`live-${appended % 50}`, [{ type: 'live', data: { n: appended } }]);
        appended++;
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    })();
    const out = dir.file('backup-1.db');
    let r;
    try {
      r = await idem(['backup', '--db', source, out, '--json']);
    } finally {
      appending = false;
      await appender;
    }
    assert.equal(r.code, 0, r.stderr);
    assert.ok(appended > 0, 'events were appended during the backup');
    assert.match(r.stderr, /backup: copied \d+ of \d+ pages/);
    const result = json<{ events: number; head: number; path: string }>(r);
    assert.equal(result.path, out);
    assert.ok(!existsSync(`${out}.partial`));
    const verify = await idem(['verify', '--db', out]);
    assert.equal(verify.code, 0, verify.stdout + verify.stderr);
    const copy = await readAllOf(out);
    const now = await readAllOf(source);
    assert.equal(copy.length, result.events);
    assert.ok(copy.length >= 10_000 && copy.length <= now.length);
    assert.deepEqual(copy, now.slice(0, copy.length), 'the copy is a prefix of the log: a snapshot');
  });

  it('refuses to overwrite without --force and to back up a missing store (creating nothing)', async () => {
    const out = dir.file('backup-2.db');
    assert.equal((await idem(['backup', '--db', source, out])).code, 0);
    const again = await idem(['backup', '--db', source, out]);
    assert.equal(again.code, 2, again.stderr);
    assert.match(again.stderr, /exists; choose another path, or replace it with --force/);
    assert.equal((await idem(['backup', '--db', source, out, '--force'])).code, 0);
    const missing = dir.file('nothing-here.db');
    const r = await idem(['backup', '--db', missing, dir.file('backup-3.db')]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /not_found: no store at/);
    assert.ok(!existsSync(missing), 'no store was created');
  });

  it('restores a backup to a new path, and over an existing store only with --force', async () => {
    const backup = dir.file('backup-4.db');
    assert.equal((await idem(['backup', '--db', source, backup])).code, 0);
    const expected = await readAllOf(backup);

    const fresh = dir.file('restored.db');
    const r = await idem(['restore', backup, '--db', fresh]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`restored .*: ${expected.length} events`));
    assert.deepEqual(await readAllOf(fresh), expected);

    const other = dir.file('other.db');
    const otherStore = await openSqliteStore({ path: other });
    await otherStore.append('other-1', [{ type: 'other', data: {} }]);
    await otherStore.close();
    const refused = await idem(['restore', backup, '--db', other]);
    assert.equal(refused.code, 2, refused.stderr);
    assert.equal((await readAllOf(other)).length, 1, 'the store was left as it was');
    assert.equal((await idem(['restore', backup, '--db', other, '--force'])).code, 0);
    assert.deepEqual(await readAllOf(other), expected);

    const notIdem = dir.file('not-idem.db');
    const { default: Database } = await import('better-sqlite3');
    new Database(notIdem).exec('CREATE TABLE t (x)');
    const bad = await idem(['restore', notIdem, '--db', dir.file('x.db')]);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /is not an idem store/);
  });

  it('refuses unknown options of backupSqliteStore, naming the key', async () => {
    await assert.rejects(
      backupSqliteStore(source, dir.file('never.db'), { forse: true } as never),
      /^InvalidInputError: forse: unknown option; did you mean force\?/,
    );
    assert.ok(!existsSync(dir.file('never.db')));
  });
});
