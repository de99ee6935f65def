// Only `append` and `serve` create a store; every other verb pointed at a missing store fails with
// exit 1 and "no store at PATH" and creates nothing (no file, no directory, no schema).
import assert from 'node:assert/strict';
import { existsSync, statSync, writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import {
  createTempDatabase,
  requireOrSkip,
  tempDir,
  type TempDatabase,
  type TempDir,
} from '../support/index.js';
import { idem, startIdem, type CliResult } from './cli.js';

/** Every verb that opens a store, with the arguments it needs; `{target}` and `{module}` are filled in. */
const READ_VERBS: [string, string[]][] = [
  ['read', ['read', 'invoice-1']],
  ['events', ['events']],
  ['tail', ['tail']],
  ['tail --consumer', ['tail', '--consumer', 'billing_v1']],
  ['consumers', ['consumers']],
  ['consumer show', ['consumer', 'show', 'billing_v1']],
  ['consumer reset', ['consumer', 'reset', 'billing_v1', '--to', '0']],
  ['consumer delete', ['consumer', 'delete', 'billing_v1']],
  [
    'consumer rebuild',
    [
      'consumer',
      'rebuild',
      'billing_v1',
      '--as',
      'billing_v2',
      '--module',
      '{module}',
      '--target-db',
      '{target}',
    ],
  ],
  ['consumer promote', ['consumer', 'promote', 'billing_v2', '--target-db', '{target}']],
  ['dlq list', ['dlq', 'list', 'billing_v1']],
  ['dlq retry', ['dlq', 'retry', 'billing_v1', '--stream', 'invoice-1']],
  ['dlq skip', ['dlq', 'skip', 'billing_v1', '--stream', 'invoice-1']],
  ['verify', ['verify']],
];

/** The verbs that only open a consumer target: they create no target either. */
const TARGET_VERBS: [string, string[]][] = [
  ['effects list', ['effects', 'list']],
  ['effects retry', ['effects', 'retry', '--all-failed']],
  ['consumer versions', ['consumer', 'versions']],
  ['consumer reset-ledger', ['consumer', 'reset-ledger', 'billing_v1', '--yes']],
];

function fill(args: string[], dir: TempDir): string[] {
  return args.map((a) =>
    a === '{target}'
      ? dir.file('missing-target/target.db')
      : a === '{module}'
        ? dir.file('projection.mjs')
        : a,
  );
}

function assertNoStore(r: CliResult, message: string): void {
  assert.equal(r.code, 1, `exit code; stdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
  assert.ok(r.stderr.includes(message), `stderr should say "${message}":\n${r.stderr}`);
  assert.equal(r.stdout, '');
}

const APPEND = ['append', 'invoice-1', '--type', 'invoice.issued', '--data', '{"amount":1}'];

describe('idem verbs on a SQLite store that does not exist', () => {
  let dir: TempDir;
  before(() => {
    dir = tempDir();
    writeFileSync(dir.file('projection.mjs'), 'export default { handle() {} };\n');
  });
  after(() => dir.cleanup());

  for (const [verb, args] of READ_VERBS) {
    it(`${verb} fails with "no store at PATH" and creates neither the file nor its directory`, async () => {
      const path = dir.file(`missing-${verb.replace(/\W+/g, '-')}/store.db`);
      const r = await idem([...fill(args, dir), '--db', path]);
      assertNoStore(r, `no store at ${path}`);
      assert.equal(existsSync(path), false, 'store file');
      assert.equal(existsSync(dir.file(`missing-${verb.replace(/\W+/g, '-')}`)), false, 'store directory');
      assert.equal(existsSync(dir.file('missing-target')), false, 'target directory');
    });
  }

  for (const [verb, args] of TARGET_VERBS) {
    it(`${verb} fails with "no target at PATH" and creates no file`, async () => {
      const path = dir.file(`missing-target-${verb.replace(/\W+/g, '-')}/target.db`);
      assertNoStore(await idem([...args, '--target-db', path]), `no target at ${path}`);
      assert.equal(existsSync(dir.file(`missing-target-${verb.replace(/\W+/g, '-')}`)), false);
    });
  }

  it('a SQLite file without the target tables gets none', async () => {
    const path = dir.file('app.db');
    writeFileSync(path, '');
    assertNoStore(await idem(['effects', 'list', '--target-db', path]), `no idem target in ${path}`);
    const db = new Database(path, { readonly: true });
    try {
      assert.deepEqual(db.prepare(`SELECT name FROM sqlite_master WHERE name LIKE 'idem%'`).all(), []);
    } finally {
      db.close();
    }
  });

  it('a file that is not an idem store is refused and left unchanged', async () => {
    const path = dir.file('empty.db');
    writeFileSync(path, '');
    assertNoStore(await idem(['consumers', '--db', path]), `no store at ${path}`);
    assert.equal(statSync(path).size, 0);
    assert.equal(existsSync(`${path}-wal`), false);
  });

  it('append creates the store (and its directory) and says so the first time only', async () => {
    const path = dir.file('new/data/store.db');
    const first = await idem([...APPEND, '--db', path, '--json']);
    assert.equal(first.code, 0, first.stderr);
    assert.ok(first.stderr.includes(`created a new store at ${path}`), first.stderr);
    const second = await idem([...APPEND, '--db', path]);
    assert.equal(second.code, 0, second.stderr);
    assert.ok(!second.stderr.includes('created'), second.stderr);
    const read = await idem(['read', 'invoice-1', '--db', path, '--json']);
    assert.equal(read.code, 0, read.stderr);
    assert.equal((JSON.parse(read.stdout) as unknown[]).length, 2);
  });

  it('serve creates the store and says so the first time only', async () => {
    const path = dir.file('served/store.db');
    for (const expectCreated of [true, false]) {
      const server = await startIdem(['serve', '--db', path, '--port', '0']);
      try {
        await server.waitFor(/listening on/);
      } finally {
        const r = await server.stop();
        assert.equal(r.stderr.includes(`created a new store at ${path}`), expectCreated, r.stderr);
      }
    }
    assert.equal(existsSync(path), true);
  });
});

const skip = await requireOrSkip('postgres');

describe('idem verbs on a PostgreSQL database without an idem store', { skip }, () => {
  let database: TempDatabase;
  let dir: TempDir;
  before(async () => {
    database = await createTempDatabase('idem_cli_nostore');
    dir = tempDir();
    writeFileSync(dir.file('projection.mjs'), 'export default { handle() {} };\n');
  });
  after(async () => {
    await database?.drop();
    await dir?.cleanup();
  });

  async function query<R extends object>(sql: string): Promise<R[]> {
    const client = new pg.Client({ connectionString: database.connectionString });
    await client.connect();
    try {
      return (await client.query<R>(sql)).rows;
    } finally {
      await client.end();
    }
  }

  async function schemaExists(): Promise<boolean> {
    const rows = await query<{ n: string | null }>(`SELECT to_regnamespace('idem')::text AS n`);
    return rows[0]?.n !== null;
  }

  for (const [verb, args] of READ_VERBS) {
    it(`${verb} fails with "no idem store in schema idem of DATABASE" and creates no schema`, async () => {
      const r = await idem([...fill(args, dir), '--postgres', database.connectionString]);
      assertNoStore(r, `no idem store in schema idem of ${database.name}`);
      assert.equal(await schemaExists(), false);
      assert.equal(existsSync(dir.file('missing-target')), false, 'target directory');
    });
  }

  for (const [verb, args] of TARGET_VERBS) {
    it(`${verb} fails with "no idem target in schema idem of DATABASE" and creates no schema`, async () => {
      const r = await idem([...args, '--target-postgres', database.connectionString]);
      assertNoStore(r, `no idem target in schema idem of ${database.name}`);
      assert.equal(await schemaExists(), false);
    });
  }

  it('IDEM_POSTGRES_URL alone is refused the same way', async () => {
    const r = await idem(['consumers'], { env: { IDEM_POSTGRES_URL: database.connectionString } });
    assertNoStore(r, `no idem store in schema idem of ${database.name}`);
  });

  it('serve creates the schema and says so; append creates it and says so the first time only', async () => {
    const server = await startIdem(['serve', '--postgres', database.connectionString, '--port', '0']);
    try {
      await server.waitFor(/listening on/);
    } finally {
      const r = await server.stop();
      assert.ok(r.stderr.includes(`created a new idem store in schema idem of ${database.name}`), r.stderr);
    }
    assert.equal(await schemaExists(), true);
    await query('DROP SCHEMA idem CASCADE');

    const first = await idem([...APPEND, '--postgres', database.connectionString]);
    assert.equal(first.code, 0, first.stderr);
    assert.ok(
      first.stderr.includes(`created a new idem store in schema idem of ${database.name}`),
      first.stderr,
    );
    const second = await idem([...APPEND, '--postgres', database.connectionString]);
    assert.equal(second.code, 0, second.stderr);
    assert.ok(!second.stderr.includes('created'), second.stderr);
    const consumers = await idem(['consumers', '--postgres', database.connectionString]);
    assert.equal(consumers.code, 0, consumers.stderr);
  });
});
