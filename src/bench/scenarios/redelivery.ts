import type Database from 'better-sqlite3';
import { join } from 'node:path';
import type { Guard } from '../../consumer/index.js';
import type { EventStore } from '../../core/eventStore.js';
import { openSqliteStore, sqliteTarget } from '../../sqlite/index.js';
import { sqliteBilledEvents, sqliteBillingHandler } from '../billing.js';
import { timeConsumer } from '../consumerRun.js';
import { baselineRow, row, type Timed } from '../measure.js';
import type { BenchRow, Scenario, ScenarioContext } from '../types.js';
import { populate } from '../workload.js';
import { openTargetDb } from './consumerSqlite.js';

const NAME = 'redelivery';

/**
 * One consumer (`guard`) into its own target file: a first pass over the `n` events, then the
 * second passes `after` asks for, each after `prepare` (which rewinds the cursor and may clear the
 * target's checkpoint). Every pass must end with each event billed once.
 */
async function passes(
  ctx: ScenarioContext,
  dir: string,
  source: EventStore,
  n: number,
  consumer: string,
  guard: Guard[],
  fn: (
    pass: (what: string, prepare: (db: Database.Database) => Promise<void>) => Promise<Timed>,
  ) => Promise<BenchRow[]>,
): Promise<BenchRow[]> {
  const db = openTargetDb(dir, consumer);
  const target = sqliteTarget(db);
  try {
    const handle = sqliteBillingHandler(db);
    return await fn(async (what, prepare) => {
      ctx.log(`${NAME}: ${consumer}: ${what}`);
      await prepare(db);
      const t = await timeConsumer({ name: consumer, source, target, handle, guard }, n);
      const billed = sqliteBilledEvents(db);
      if (billed !== n)
        throw new Error(
          `${consumer}, ${what}: billed ${billed} events, expected ${n} (a duplicate was applied)`,
        );
      return t;
    });
  } finally {
    await target.close();
    db.close();
  }
}

/** A second pass's row, read against its consumer's first pass (target: 3x its rate). */
const secondPass = (shape: string, measured: Timed, first: BenchRow): BenchRow =>
  row({
    scenario: NAME,
    shape,
    measured,
    against: first,
    target: { text: '>= 3x first pass', met: measured.eventsPerSec >= 3 * first.eventsPerSec },
  });

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
    try {
      ctx.log(`${NAME}: populating the source with ${n} events`);
      await populate(source, n);
      const nothing = (): Promise<void> => Promise.resolve();
      const rewind =
        (consumer: string, clearCheckpoint: boolean) =>
        async (db: Database.Database): Promise<void> => {
          await source.consumers.reset(consumer, 0);
          if (clearCheckpoint) db.prepare('DELETE FROM idem_checkpoints WHERE consumer = ?').run(consumer);
        };

      // The billing consumer as the other scenarios run it: guards event-id and entity-version.
      const both = await passes(
        ctx,
        dir,
        source,
        n,
        'billing_v1',
        ['event-id', 'entity-version'],
        async (pass) => {
          const first = baselineRow(NAME, 'first pass, all new', await pass('first pass (all new)', nothing));
          // Redelivery after a lost acknowledgement: the store's cursor goes back to 0, the target's
          // checkpoint still says n, so whole batches are recognised at the checkpoint.
          const byCheckpoint = await pass('second pass, cursor reset', rewind('billing_v1', false));
          // The checkpoint row gone too: the entity versions recognise every event, so the ledger is
          // not asked (it is only asked about events the versions do not already call duplicates).
          const byVersions = await pass(
            'second pass, cursor reset and checkpoint cleared',
            rewind('billing_v1', true),
          );
          return [
            first,
            secondPass(
              'second pass, all duplicates (cursor reset: skipped at the target checkpoint)',
              byCheckpoint,
              first,
            ),
            secondPass(
              'second pass, all duplicates (checkpoint cleared: recognised by entity versions)',
              byVersions,
              first,
            ),
          ];
        },
      );

      // The strictest case: a consumer guarded by event ids alone, its checkpoint cleared, so every
      // event of the second pass is looked up in the ledger.
      const ledgerOnly = await passes(ctx, dir, source, n, 'billing_ids_v1', ['event-id'], async (pass) => {
        const first = baselineRow(
          NAME,
          "guard 'event-id' only: first pass, all new",
          await pass('first pass (all new)', nothing),
        );
        const byLedger = await pass(
          'second pass, cursor reset and checkpoint cleared',
          rewind('billing_ids_v1', true),
        );
        return [
          first,
          secondPass(
            "guard 'event-id' only: second pass, all duplicates (checkpoint cleared: every event looked up in the ledger)",
            byLedger,
            first,
          ),
        ];
      });
      return [...both, ...ledgerOnly];
    } finally {
      await source.close();
    }
  },
};
