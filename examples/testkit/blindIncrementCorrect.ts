// CORRECT: the balance is written through ctx.tx, so it commits or rolls back with the ledger row
// and the checkpoint; a receipt for large deposits goes through ctx.effect (the outbox).
import type Database from 'better-sqlite3';
import { createConsumer } from '../../src/index.js';
import type { SqliteTarget } from '../../src/sqlite/index.js';
import type { ConsumerFactory, StateReader } from '../../src/testkit/index.js';
import { balancesTable, events, type Deposits } from './deposits.js';

export { events };

export const consumer: ConsumerFactory<SqliteTarget> = (source, target, { version }) => {
  const table = balancesTable(target.db, version);
  const add = target.db.prepare(
    `INSERT INTO ${table} VALUES (?, ?) ON CONFLICT (account) DO UPDATE SET balance = balance + excluded.balance`,
  );
  return createConsumer<Database.Database, Deposits>({
    name: `balances_v${version}`,
    source,
    target,
    filter: { types: ['deposit.made'] },
    handle: async (event, ctx) => {
      const { amount } = event.data;
      add.run(event.stream, amount);
      if (amount >= 9) await ctx.effect('receipt', { account: event.stream, amount });
    },
  });
};

export const read: StateReader<SqliteTarget> = (target, { version }) =>
  target.db
    .prepare(`SELECT account, balance FROM ${balancesTable(target.db, version)} ORDER BY account`)
    .all();
