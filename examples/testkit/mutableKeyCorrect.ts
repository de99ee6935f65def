// CORRECT: the dedup key is the event id (the default guard): one balance change per fact,
// whatever the payload says. A payload field never identifies a fact.
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
    handle: (event) => {
      add.run(event.stream, event.data.amount);
    },
  });
};

export const read: StateReader<SqliteTarget> = (target, { version }) =>
  target.db
    .prepare(`SELECT account, balance FROM ${balancesTable(target.db, version)} ORDER BY account`)
    .all();
