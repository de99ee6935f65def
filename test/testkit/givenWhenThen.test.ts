import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import type Database from 'better-sqlite3';
import { createConsumer } from '../../src/index.js';
import type { SqliteTarget } from '../../src/sqlite/index.js';
import { given, type ConsumerFactory, type StateReader } from '../../src/testkit/index.js';

const balances: ConsumerFactory<SqliteTarget> = (source, target) => {
  target.db.exec('CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, balance INTEGER NOT NULL)');
  const add = target.db.prepare(
    'INSERT INTO balances VALUES (?, ?) ON CONFLICT (account) DO UPDATE SET balance = balance + excluded.balance',
  );
  return createConsumer<Database.Database>({
    name: 'balances_v1',
    source,
    target,
    onError: { attempts: 1 },
    handle: async (e, ctx) => {
      const { amount } = e.data as { amount: number };
      if (amount < 0) throw new Error(`negative deposit of ${amount}`);
      add.run(e.stream, amount);
      if (amount >= 100) await ctx.effect('receipt', { account: e.stream, amount });
    },
  });
};

const read: StateReader<SqliteTarget> = (target) =>
  target.db.prepare('SELECT account, balance FROM balances ORDER BY account').all();

const deposit = (account: string, amount: number) => ({
  stream: account,
  type: 'deposit.made',
  data: { amount },
});

describe('given/when/then', () => {
  it('passes when the state is the expected one, delivered once or twice, and returns the effects', async () => {
    const events = [deposit('a-1', 5), deposit('a-2', 100), deposit('a-1', 7)];
    const expected = [
      { balance: 12, account: 'a-1' },
      { account: 'a-2', balance: 100 },
    ];
    const once = await given(events).when(balances, read).then(expected);
    assert.deepEqual(
      once.effects.map((e) => [e.kind, e.payload, e.status]),
      [['receipt', { account: 'a-2', amount: 100 }, 'done']],
    );
    await given(events).when(balances, read, { deliver: 'twice' }).then(expected);
    await given(events)
      .when(balances, read)
      .then((state: unknown) => assert.equal((state as unknown[]).length, 2));
  });

  it('rejects with an AssertionError naming the differing path', async () => {
    await assert.rejects(
      given([deposit('a-1', 5)])
        .when(balances, read)
        .then([{ account: 'a-1', balance: 6 }]),
      (err: Error & { expected?: unknown; actual?: unknown }) => {
        assert.equal(err.name, 'AssertionError');
        assert.match(err.message, /\$\[0\]\.balance: expected 6, got 5/);
        assert.deepEqual(err.actual, [{ account: 'a-1', balance: 5 }]);
        return true;
      },
    );
  });

  it('thenFails expects the consumer to stop with a matching error', async () => {
    await given([deposit('a-1', -3)])
      .when(balances, read)
      .thenFails(/negative deposit of -3/);
    await assert.rejects(
      given([deposit('a-1', 3)])
        .when(balances, read)
        .thenFails(/negative/),
      /the consumer did not fail/,
    );
  });

  it('imports no test runner, so node:test, vitest and jest can all run it', () => {
    const dir = new URL('../../src/testkit/', import.meta.url);
    const runners = readdirSync(dir).filter((f) =>
      /from '(node:test|vitest|jest|@jest\/[^']+|mocha)'/.test(readFileSync(new URL(f, dir), 'utf8')),
    );
    assert.deepEqual(runners, []);
  });
});
