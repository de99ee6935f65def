import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { postgresTarget } from '../../src/postgres/target.js';
import { migrateTarget, TARGET_MIGRATIONS } from '../../src/postgres/targetMigrations.js';
import { randomIdentifier } from '../support/names.js';
import { requireOrSkip } from '../support/services.js';
import { postgresFixtures } from './support/targetFixture.js';
import { describeConsumer } from './consumer.suite.js';

// One temporary PostgreSQL database for the file, a schema per test (both dropped afterwards);
// skipped when PostgreSQL is down, unless IDEM_REQUIRE_SERVICES=1.
const skip = await requireOrSkip('postgres');
const fixtures = postgresFixtures();
const makePostgresFixture = fixtures.make;
after(() => fixtures.close());
/** IDEM_KEEP_TEST_DATA=1 keeps the schemas the tests below make themselves, as the fixtures keep theirs. */
const keep = process.env.IDEM_KEEP_TEST_DATA === '1';
describe('postgres target', { skip }, () => {
  describeConsumer('postgres target', makePostgresFixture);
});

describe('postgres target schema', { skip }, () => {
  it('renames the ledger of a version 2 target to target_ledger, keeping its rows, with two processes migrating at once', async () => {
    const connectionString = await fixtures.connectionString();
    // Two pools stand for two processes starting on the same target.
    const pools = [0, 1].map(() => new pg.Pool({ connectionString, max: 2 }));
    const schema = randomIdentifier('ledger_upgrade');
    try {
      await pools[0]!.query(`CREATE SCHEMA ${schema}`);
      await migrateTarget(
        pools[0]!,
        schema,
        TARGET_MIGRATIONS.filter((m) => m.version <= 2),
      );
      await pools[0]!.query(
        `INSERT INTO ${schema}.target_processed (consumer, key, position)
           SELECT 'billing_v1', 'event:' || i, i FROM generate_series(1, 300) AS i`,
      );

      const targets = pools.map((pool) => postgresTarget(pool, { schema }));
      await Promise.all(targets.map((t) => t.migrate()));

      for (const t of targets) assert.equal(await t.ledgerSize('billing_v1'), 300);
      const found = await targets[1]!.transaction(async (t) => [
        ...(await t.processedKeys('billing_v1', ['event:1', 'event:300', 'event:301'])),
      ]);
      assert.deepEqual(found.sort(), ['event:1', 'event:300']);
      const tables = await pools[0]!.query<{ name: string }>(
        `SELECT table_name AS name FROM information_schema.tables
          WHERE table_schema = $1 AND table_name IN ('target_processed', 'target_ledger')`,
        [schema],
      );
      assert.deepEqual(
        tables.rows.map((r) => r.name),
        ['target_ledger'],
      );
      const versions = await pools[0]!.query<{ version: number }>(
        `SELECT version FROM ${schema}.target_migrations ORDER BY version`,
      );
      assert.deepEqual(
        versions.rows.map((r) => r.version),
        TARGET_MIGRATIONS.map((m) => m.version),
      );
    } finally {
      if (!keep) await pools[0]!.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await Promise.all(pools.map((pool) => pool.end()));
    }
  });
});

describe('postgresTarget options', { skip }, () => {
  it('refuses a bad schema name, and works with the longest one', async () => {
    const pool = new pg.Pool({ connectionString: await fixtures.connectionString(), max: 2 });
    const long = `s${'x'.repeat(61)}1`;
    const other = `s${'x'.repeat(61)}2`;
    try {
      assert.throws(() => postgresTarget(pool, { schema: 'bad-name' }), {
        code: 'invalid_input',
        field: 'schema',
      });
      for (const schema of [long, other]) {
        const t = postgresTarget(pool, { schema });
        await t.migrate();
        await t.transaction(async (tx) => {
          await tx.checkpoint('c');
          await tx.record('c', {
            entries: [{ key: `event:${schema}`, position: 1 }],
            versions: new Map([['s-1', 1]]),
            position: 1,
            epoch: 1,
          });
        });
        assert.deepEqual(await t.readCheckpoint('c'), { position: 1, epoch: 1 });
        assert.equal(await t.ledgerSize('c'), 1);
      }
    } finally {
      if (!keep)
        for (const schema of [long, other]) await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await pool.end();
    }
  });
});
