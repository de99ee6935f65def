import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { VerifyReport } from '../../src/testkit/index.js';
import { createTempDatabase, requireOrSkip, tempDir } from '../support/index.js';
import { idem, json } from './cli.js';

const INDEX = fileURLToPath(new URL('../../src/index.ts', import.meta.url));

/** A PostgreSQL consumer: per-account sums in the target's schema, written through ctx.tx. */
const MODULE = `
import { createConsumer } from ${JSON.stringify(INDEX)};
export const events = Array.from({ length: 30 }, (_, i) => ({
  stream: 'account-' + (i % 3), type: 'deposit.made', data: { amount: i + 1 },
}));
const table = (target, version) => '"' + target.schema + '".sums_v' + version;
export const consumer = (source, target, { version }) =>
  createConsumer({
    name: 'sums_v' + version,
    source,
    target,
    handle: async (e, ctx) => {
      await ctx.tx.query('CREATE TABLE IF NOT EXISTS ' + table(target, version) + ' (account text PRIMARY KEY, total int NOT NULL)');
      await ctx.tx.query(
        'INSERT INTO ' + table(target, version) + ' VALUES ($1, $2) ON CONFLICT (account) DO UPDATE SET total = ' +
          table(target, version) + '.total + excluded.total',
        [e.stream, e.data.amount],
      );
    },
  });
export const read = async (target, { version }) => {
  await target.pool.query('CREATE TABLE IF NOT EXISTS ' + table(target, version) + ' (account text PRIMARY KEY, total int NOT NULL)');
  return (await target.pool.query('SELECT account, total FROM ' + table(target, version) + ' ORDER BY account')).rows;
};
`;

describe('idem verify --consumer --postgres', async () => {
  const skip = await requireOrSkip('postgres');
  it('runs every scenario in temporary schemas of the database and drops them', { skip }, async () => {
    const db = await createTempDatabase();
    const dir = tempDir();
    try {
      const mod = dir.file('sums.mts');
      writeFileSync(mod, MODULE);
      const r = await idem(['verify', '--consumer', mod, '--postgres', db.connectionString, '--json']);
      assert.equal(r.code, 0, r.stderr + r.stdout);
      const report = json<VerifyReport>(r);
      assert.equal(report.ok, true);
      assert.match(report.backend, /^postgres \(temporary schemas in idem_test_/);
      assert.equal(report.events, 30);
      const pg = (await import('pg')).default;
      const client = new pg.Client({ connectionString: db.connectionString });
      await client.connect();
      try {
        const left = await client.query(
          "select nspname from pg_namespace where nspname like 'idem_verify_%'",
        );
        assert.deepEqual(left.rows, []);
      } finally {
        await client.end();
      }
    } finally {
      await dir.cleanup();
      await db.drop();
    }
  });
});
