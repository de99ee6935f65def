// Secrets never reach the terminal: passwords in PostgreSQL connection strings are masked in every
// message (through the real `idem` process), and a malformed IDEM_TOKENS is reported without its text.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { redactConnectionString } from '../../src/cli/redact.js';
import {
  createTempDatabase,
  requireOrSkip,
  tempDir,
  type TempDatabase,
  type TempDir,
} from '../support/index.js';
import { idem, startIdem, type CliResult } from './cli.js';

const skipPostgres = await requireOrSkip('postgres');

/** Every secret below contains this, so one check covers every part of it. */
const SECRET = 'hun@ter2';

function assertNoSecret(r: CliResult, secret: string): void {
  for (const [where, text] of [
    ['stdout', r.stdout],
    ['stderr', r.stderr],
  ] as const) {
    assert.ok(!text.includes(secret), `${where} shows the secret:\n${text}`);
    // Also no fragment of it: the part after an unencoded `@` was the old leak.
    assert.ok(!text.includes('ter2'), `${where} shows part of the secret:\n${text}`);
  }
}

describe('connection strings are redacted by parsing', () => {
  it('masks URL passwords (empty user, `@` inside, query), key=value passwords, and nothing else', () => {
    const cases: [string, string][] = [
      ['postgres://:hunter2@127.0.0.1:1:2/db', 'postgres://:***@127.0.0.1:1:2/db'],
      ['postgres://u:hun@ter2@127.0.0.1:1/db', 'postgres://u:***@127.0.0.1:1/db'],
      ['postgres://u:a/b?c@h/db', 'postgres://u:***@h/db'],
      [
        'postgres://u@h/db?sslmode=disable&password=hunter2&x=1',
        'postgres://u@h/db?sslmode=disable&password=***&x=1',
      ],
      ['host=h port=1 user=u password=hunter2 dbname=db', 'host=h port=1 user=u password=*** dbname=db'],
      ["host=h password='hun ter\\'2' dbname=d", 'host=h password=*** dbname=d'],
      ['postgres://postgres@127.0.0.1:5432/idem', 'postgres://postgres@127.0.0.1:5432/idem'],
      ['http://127.0.0.1:4680', 'http://127.0.0.1:4680'],
    ];
    for (const [input, expected] of cases) assert.equal(redactConnectionString(input), expected, input);
  });
});

describe('idem prints no secrets in errors', () => {
  let dir: TempDir;
  before(() => {
    dir = tempDir();
  });
  after(() => dir.cleanup());

  for (const [label, connection] of [
    ['an unparseable URL with an empty user', `postgres://:${SECRET}@127.0.0.1:1:2/db`],
    ['a password containing @', `postgres://u:${SECRET}@127.0.0.1:1/db`],
    ['a ?password= parameter', `postgres://u@127.0.0.1:1/db?password=${encodeURIComponent(SECRET)}`],
    ['a key=value connection string', `host=127.0.0.1 port=1 user=u password=${SECRET} dbname=db`],
  ] as const) {
    it(`idem read --postgres with ${label}`, async () => {
      const r = await idem(['read', 'invoice-1', '--postgres', connection, '--json']);
      assert.notEqual(r.code, 0, r.stderr);
      assert.match(r.stderr, /^idem: \w+: /m);
      assertNoSecret(r, SECRET);
      const fromEnv = await idem(['events'], { env: { IDEM_POSTGRES_URL: connection } });
      assert.notEqual(fromEnv.code, 0);
      assertNoSecret(fromEnv, SECRET);
    });
  }

  it('a malformed IDEM_TOKENS is reported by position, without its text', async () => {
    for (const tokens of [
      `[${SECRET}]`,
      `[{"name":"a","token":"${SECRET}" "scopes":["admin"]}]`,
      `{"tokens":[{"name":"a","token":"${SECRET}",}]}`,
    ]) {
      const r = await idem(['serve', '--db', dir.file('t.db'), '--port', '0'], {
        env: { IDEM_TOKENS: tokens },
      });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /^idem: invalid_input: IDEM_TOKENS: is not valid JSON/m);
      assertNoSecret(r, SECRET);
    }
  });

  describe('on a real PostgreSQL', { skip: skipPostgres }, () => {
    let database: TempDatabase;
    before(async () => {
      database = await createTempDatabase('idem_cli_secret');
    });
    after(() => database?.drop());

    it('serve names the store with its password masked (trust auth ignores the password)', async () => {
      const url = new URL(database.connectionString);
      const withPassword = `postgres://${url.username || 'postgres'}:${SECRET}@${url.host}${url.pathname}`;
      const inQuery = `${database.connectionString}?password=${encodeURIComponent(SECRET)}`;
      for (const connection of [withPassword, inQuery]) {
        const server = await startIdem(['serve', '--postgres', connection, '--port', '0']);
        try {
          await server.waitFor(/listening on http:\/\/127\.0\.0\.1:\d+ \(store: postgres:\/\/[^)]*\*\*\*/);
        } finally {
          const exit = await server.stop('SIGINT');
          assert.equal(exit.code, 0, exit.stderr);
          assertNoSecret(exit, SECRET);
        }
      }
    });
  });
});
