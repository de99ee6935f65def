// BROKEN: the dedup key is the transfer's reference, a payload field the payer chooses. Two different
// deposits with the same reference share a key: the second is skipped as a "duplicate" and lost.
// `idem verify --consumer` reports "Every effect has a stable deduplication key" as failing.
import type Database from 'better-sqlite3';
import { createConsumer } from '../../src/index.js';
import type { SqliteTarget } from '../../src/sqlite/index.js';
import type { ConsumerFactory, StateReader } from '../../src/testkit/index.js';
import { balancesTable, events, type Deposit, type Deposits } from './deposits.js';

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
    guard: { name: 'reference', key: (event) => (event.data as unknown as Deposit).reference },
    handle: (event) => {
      add.run(event.stream, event.data.amount);
    },
  });
};

export const read: StateReader<SqliteTarget> = (target, { version }) =>
  target.db
    .prepare(`SELECT account, balance FROM ${balancesTable(target.db, version)} ORDER BY account`)
    .all();
