import { join } from 'node:path';
import { openSqliteStore, sqliteTarget } from '../../sqlite/index.js';
import { sqliteBilledEvents, sqliteBillingHandler } from '../billing.js';
import { timeConsumer } from '../consumerRun.js';
import { baselineRow, row, type Timed } from '../measure.js';
import type { Scenario } from '../types.js';
import { populate } from '../workload.js';
import { openTargetDb } from './consumerSqlite.js';

const NAME = 'redelivery';
const CONSUMER = 'billing_v1';

/** Scenario 7: the same events delivered twice to the idempotent consumer; the second pass is all duplicates. */
export const redelivery: Scenario = {
  name: NAME,
  description:
    'the same events delivered twice to the SQLite billing consumer; the second pass is all duplicates',
  needs: [],
  async run(ctx) {
    const n = ctx.size(5_000, 100_000, 500);
    const dir = await ctx.tempDir();
    const source = await openSqliteStore({ path: join(dir, 'source.db'), durability: 'full' });
    const db = openTargetDb(dir, 'target');
    const target = sqliteTarget(db);
    try {
      ctx.log(`${NAME}: populating the source with ${n} events`);
      await populate(source, n);
      const handle = sqliteBillingHandler(db);
      const pass = async (what: string): Promise<Timed> => {
        const t = await timeConsumer({ name: CONSUMER, source, target, handle }, n);
        const billed = sqliteBilledEvents(db);
        if (billed !== n)
          throw new Error(`${what}: billed ${billed} events, expected ${n} (a duplicate was applied)`);
        return t;
      };

      ctx.log(`${NAME}: first pass (${n} new events)`);
      const first = baselineRow(NAME, 'first pass, all new', await pass('first pass'));

      // Redelivery after a lost acknowledgement: the store's cursor goes back to 0, the target's
      // checkpoint still says n, so whole batches are recognised at the checkpoint.
      ctx.log(`${NAME}: second pass, cursor reset`);
      await source.consumers.reset(CONSUMER, 0);
      const byCheckpoint = await pass('second pass (checkpoint)');

      // The stricter case: the checkpoint row is gone too, so every event is looked up in the ledger.
      ctx.log(`${NAME}: second pass, cursor reset and target checkpoint cleared`);
      await source.consumers.reset(CONSUMER, 0);
      db.prepare('DELETE FROM idem_checkpoints WHERE consumer = ?').run(CONSUMER);
      const byLedger = await pass('second pass (ledger)');

      const target3x = (t: Timed): { text: string; met: boolean } => ({
        text: '>= 3x first pass',
        met: t.eventsPerSec >= 3 * first.eventsPerSec,
      });
      return [
        first,
        row({
          scenario: NAME,
          shape: 'second pass, all duplicates (cursor reset: skipped at the target checkpoint)',
          measured: byCheckpoint,
          against: first,
          target: target3x(byCheckpoint),
        }),
        row({
          scenario: NAME,
          shape: 'second pass, all duplicates (checkpoint cleared: ledger lookups)',
          measured: byLedger,
          against: first,
          target: target3x(byLedger),
        }),
      ];
    } finally {
      await target.close();
      db.close();
      await source.close();
    }
  },
};
