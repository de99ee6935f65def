import type Database from 'better-sqlite3';
import { createConsumer } from '../../consumer/index.js';
import type { SqliteTarget } from '../../sqlite/index.js';
import {
  given,
  verifyConsumer,
  type ConsumerFactory,
  type StateReader,
  type TestEvent,
} from '../../testkit/index.js';
import { baselineRow, row, timed } from '../measure.js';
import type { Scenario } from '../types.js';

const NAME = 'testkit';

/** Deposits into 50 accounts, a receipt effect for one in ten. */
function history(n: number): TestEvent[] {
  return Array.from({ length: n }, (_, i) => ({
    stream: `account-${i % 50}`,
    type: 'deposit.made',
    data: { amount: 1 + (i % 10) },
  }));
}

const consumer: ConsumerFactory<SqliteTarget> = (source, target, { version }) => {
  const table = `balances_v${version}`;
  target.db.exec(`CREATE TABLE IF NOT EXISTS ${table} (account TEXT PRIMARY KEY, balance INTEGER NOT NULL)`);
  const add = target.db.prepare(
    `INSERT INTO ${table} VALUES (?, ?) ON CONFLICT (account) DO UPDATE SET balance = balance + excluded.balance`,
  );
  return createConsumer<Database.Database>({
    name: `balances_v${version}`,
    source,
    target,
    handle: async (e, ctx) => {
      const { amount } = e.data as { amount: number };
      add.run(e.stream, amount);
      if (amount === 10) await ctx.effect('receipt', { account: e.stream });
    },
  });
};

const read: StateReader<SqliteTarget> = (target, { version }) =>
  target.db.prepare(`SELECT account, balance FROM balances_v${version} ORDER BY account`).all();

/** verifyConsumer on a correct consumer, against one clean run of it (fresh SQLite files each). */
export const testkitVerify: Scenario = {
  name: NAME,
  description:
    'verifyConsumer (clean run + 8 fault scenarios, fresh SQLite files each) on a few thousand events',
  needs: [],
  async run(ctx) {
    const n = ctx.size(1_000, 5_000, 100);
    const events = history(n);
    ctx.log(`${NAME}: one clean run of ${n} events`);
    const once = await timed(n, async () => {
      await given(events)
        .when(consumer, read)
        .then((state: unknown) => {
          if (!Array.isArray(state) || state.length !== 50) throw new Error('the clean run lost accounts');
        });
    });
    const base = baselineRow(NAME, 'one clean run (given/when: fresh files, append, catch up)', once);
    ctx.log(`${NAME}: verifyConsumer over ${n} events`);
    let ok = false;
    const verified = await timed(n, async () => {
      ok = (await verifyConsumer<SqliteTarget>({ consumer, read, events })).ok;
    });
    if (!ok) throw new Error('verifyConsumer failed a correct consumer');
    return [
      base,
      row({
        scenario: NAME,
        shape: 'verifyConsumer: clean run + 8 scenarios, every statement holds',
        measured: verified,
        against: base,
        target: { text: '< 60 s', met: verified.seconds < 60 },
      }),
    ];
  },
};
