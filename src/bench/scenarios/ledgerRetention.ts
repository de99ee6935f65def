import { join } from 'node:path';
import type { ConsumerTarget } from '../../core/consumerTarget.js';
import type { EventStore } from '../../core/eventStore.js';
import type { LedgerOptions } from '../../core/ledgerRetention.js';
import { openSqliteStore, sqliteTarget } from '../../sqlite/index.js';
import { sqliteBilledEvents, sqliteBillingHandler } from '../billing.js';
import { timeConsumer } from '../consumerRun.js';
import { baselineRow, inRounds, row, type Timed } from '../measure.js';
import type { Scenario, ScenarioContext } from '../types.js';
import { populate } from '../workload.js';
import { openTargetDb } from './consumerSqlite.js';

const NAME = 'ledger-retention';
/** The most ledger rows a consumer with `retain: 'checkpoint'` may hold at any time. */
const MAX_ROWS = 10_000;

interface Measured extends Timed {
  /** Ledger rows at the end, and the most seen while it ran (sampled every 100 ms, with retention only). */
  finalRows: number;
  peakRows: number;
}

/** Samples the target's ledger size until `done` resolves; returns the largest seen. */
async function peakLedger<Tx>(
  target: ConsumerTarget<Tx>,
  name: string,
  done: Promise<unknown>,
): Promise<number> {
  let peak = 0;
  let finished = false;
  void done.finally(() => (finished = true)).catch(() => undefined);
  while (!finished) {
    peak = Math.max(peak, await target.ledgerSize(name));
    await new Promise((r) => setTimeout(r, 100));
  }
  return peak;
}

async function run(
  dir: string,
  file: string,
  source: EventStore,
  n: number,
  ledger: LedgerOptions | undefined,
): Promise<Measured> {
  const db = openTargetDb(dir, file);
  const target = sqliteTarget(db);
  const name = `billing_${file}_v1`;
  try {
    const timing = timeConsumer(
      {
        name,
        source,
        target,
        guard: ['event-id'],
        handle: sqliteBillingHandler(db),
        ...(ledger ? { ledger } : {}),
      },
      n,
    );
    // Only the pruned ledger is sampled: counting a growing one would slow the run it is compared with.
    const peakRows = ledger ? await peakLedger(target, name, timing) : 0;
    const t = await timing;
    const billed = sqliteBilledEvents(db);
    if (billed !== n) throw new Error(`${file}: billed ${billed} events, expected ${n}`);
    return { ...t, finalRows: await target.ledgerSize(name), peakRows: Math.max(peakRows, 0) };
  } finally {
    await target.close();
    db.close();
  }
}

/**
 * The billing consumer (event-id guard) over the whole log, with `ledger: { retain: 'checkpoint' }`
 * and without: the ledger's size and the cost of pruning it.
 */
export const ledgerRetention: Scenario = {
  name: NAME,
  description: "billing consumer with ledger: { retain: 'checkpoint' } vs every ledger row kept (SQLite)",
  needs: [],
  async run(ctx: ScenarioContext) {
    const n = ctx.size(20_000, 1_000_000, 1000);
    const dir = await ctx.tempDir();
    const source = await openSqliteStore({ path: join(dir, 'source.db'), durability: 'full' });
    try {
      ctx.log(`${NAME}: populating the source with ${n} events`);
      await populate(source, n, { ids: 'v7' });
      let runs = 0;
      const sizes: Record<'kept' | 'pruned', Measured | null> = { kept: null, pruned: null };
      const m = await inRounds(
        ctx.rounds,
        {
          kept: {
            events: n,
            run: async () => (sizes.kept = await run(dir, `kept_${++runs}`, source, n, undefined)),
          },
          pruned: {
            events: n,
            run: async () =>
              (sizes.pruned = await run(dir, `pruned_${++runs}`, source, n, { retain: 'checkpoint' })),
          },
        },
        { log: (message) => ctx.log(`${NAME}: ${message}`), warmUp: false },
      );
      const kept = baselineRow(NAME, 'every ledger row kept, event-id guard', m.kept, {
        ledgerRows: sizes.kept?.finalRows ?? 0,
      });
      const pruned = sizes.pruned!;
      return [
        kept,
        row({
          scenario: NAME,
          shape: "ledger: { retain: 'checkpoint' }, event-id guard",
          measured: m.pruned,
          against: kept,
          target: {
            text: `ledger < ${MAX_ROWS.toLocaleString('en-US')} rows, >= 0.91x`,
            met: pruned.peakRows < MAX_ROWS && m.pruned.eventsPerSec >= 0.91 * m.kept.eventsPerSec,
          },
          extra: { ledgerRows: pruned.finalRows, peakLedgerRows: pruned.peakRows },
        }),
      ];
    } finally {
      await source.close();
    }
  },
};
