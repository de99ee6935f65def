// The history every example is verified on: deposits into six accounts. `reference` is what the
// payer typed on the transfer: it is often reused, so it identifies nothing.
import type { TestEvent } from '../../src/testkit/index.js';

export interface Deposit {
  amount: number;
  reference: string;
}

/** The examples' event map: `createConsumer<Db, Deposits>` types each handler's `event.data`. */
export interface Deposits {
  'deposit.made': Deposit;
}

export const events: TestEvent[] = Array.from({ length: 60 }, (_, i) => ({
  stream: `account-${i % 6}`,
  type: 'deposit.made',
  data: { amount: 1 + ((i * 7) % 10), reference: `rent-${i % 9}` },
}));

/** The balances table of a consumer version, created if needed. */
export function balancesTable(db: { exec(sql: string): unknown }, version: number): string {
  const table = `balances_v${version}`;
  db.exec(`CREATE TABLE IF NOT EXISTS ${table} (account TEXT PRIMARY KEY, balance INTEGER NOT NULL)`);
  return table;
}
