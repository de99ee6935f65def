import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { postgresTarget } from '../../src/postgres/target.js';
import { createTempDatabase } from '../support/postgres.js';
import { requireOrSkip } from '../support/services.js';
import { postgresFixtures } from './support/targetFixture.js';
import { describeConsumer } from './consumer.suite.js';

// One temporary PostgreSQL database for the file, a schema per test (both dropped afterwards);
// skipped when PostgreSQL is down, unless IDEM_REQUIRE_SERVICES=1.
const skip = await requireOrSkip('postgres');
const fixtures = postgresFixtures();
const makePostgresFixture = fixtures.make;
after(() => fixtures.close());
describe('postgres target', { skip }, () => {
  describeConsumer('postgres target', makePostgresFixture);
});

describe('postgresTarget options', { skip }, () => {
  it('refuses a bad schema name, and works with the longest one', async () => {
    const db = await createTempDatabase('idem_consumer');
    const pool = new pg.Pool({ connectionString: db.connectionString, max: 2 });
    try {
      assert.throws(() => postgresTarget(pool, { schema: 'bad-name' }), {
        code: 'invalid_input',
        field: 'schema',
      });
      const long = `s${'x'.repeat(61)}1`;
      const other = `s${'x'.repeat(61)}2`;
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
      await pool.end();
      await db.drop();
    }
  });
});
