// BROKEN: the balance is incremented through a second connection, outside the target transaction.
// A batch that rolls back (a crash, a poison event) keeps its increments, and its redelivery adds
// them again: balances double. `idem verify --consumer` reports "Output and processed marker commit
// atomically" as failing.
import Database from 'better-sqlite3';
import { createConsumer } from '../../src/index.js';
import type { SqliteTarget } from '../../src/sqlite/index.js';
import type { ConsumerFactory, StateReader } from '../../src/testkit/index.js';
import { balancesTable, events, type Deposits } from './deposits.js';

export { events };

const counters = new Map<string, Database.Database>();

/** The second connection: another database file beside the target, opened once per target. */
function countersOf(target: SqliteTarget): Database.Database {
  const path = `${target.db.name}.counters`;
  let db = counters.get(path);
  if (!db) {
    db = new Database(path);
    db.pragma('journal_mode = WAL');
    counters.set(path, db);
  }
  return db;
}

export const consumer: ConsumerFactory<SqliteTarget> = (source, target, { version }) => {
  const second = countersOf(target);
  const table = balancesTable(second, version);
  const add = second.prepare(
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

export const read: StateReader<SqliteTarget> = (target, { version }) => {
  const second = countersOf(target);
  return second
    .prepare(`SELECT account, balance FROM ${balancesTable(second, version)} ORDER BY account`)
    .all();
};
