import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { withNewOrExistingTarget } from '../../src/cli/targetFlags.js';
import { PostgresTarget } from '../../src/postgres/target.js';
import { createTempDatabase, requireOrSkip, type TempDatabase } from '../support/index.js';
import { POSTGRES_URL } from '../support/services.js';
import { until } from '../support/until.js';

const skip = await requireOrSkip('postgres');

describe('the CLI’s PostgreSQL target (--target-postgres)', { skip }, () => {
  let database: TempDatabase;
  before(async () => {
    database = await createTempDatabase('idem_cli_target');
  });
  after(() => database?.drop());

  it('survives an idle pooled connection that the server terminates (a long rebuild keeps running)', async () => {
    const seen = await withNewOrExistingTarget(
      { targetPostgres: database.connectionString },
      {},
      async (target) => {
        assert.ok(target instanceof PostgresTarget);
        await target.readCheckpoint('billing_v1');
        const pool = target.pool;
        assert.equal(pool.idleCount, 1, 'one idle connection in the pool');
        // What a server restart or an operator's pg_terminate_backend does to an idle connection.
        const admin = new pg.Client({ connectionString: POSTGRES_URL });
        await admin.connect();
        try {
          const r = await admin.query(
            'select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
            [database.name],
          );
          assert.equal(r.rowCount, 1);
        } finally {
          await admin.end();
        }
        // Without a listener on the pool, its error event would have ended the process here.
        await until(() => pool.totalCount === 0, { message: 'the pool to drop the dead connection' });
        // The next query opens a new connection.
        return target.readCheckpoint('billing_v1');
      },
    );
    assert.deepEqual(seen, { position: 0, epoch: 0 });
  });
});
