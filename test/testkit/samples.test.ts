// verifyConsumer without events: a history derived from samples and the consumer's filter, from a
// seed the report gives back, shrunk like a given one when a statement fails.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type Database from 'better-sqlite3';
import { createConsumer } from '../../src/index.js';
import type { SqliteTarget } from '../../src/sqlite/index.js';
import { deriveHistory } from '../../src/testkit/derive.js';
import { verifyConsumer, type ConsumerFactory, type TestEvent } from '../../src/testkit/index.js';
import * as keyBroken from '../../examples/testkit/mutableKeyBroken.js';
import * as keyCorrect from '../../examples/testkit/mutableKeyCorrect.js';

/** Four deposits into two accounts, two of them with one reference. */
const deposits: TestEvent[] = [
  { stream: 'account-1', type: 'deposit.made', data: { amount: 5, reference: 'rent' } },
  { stream: 'account-1', type: 'deposit.made', data: { amount: 7, reference: 'gift' } },
  { stream: 'account-2', type: 'deposit.made', data: { amount: 3, reference: 'rent' } },
  { stream: 'account-2', type: 'deposit.made', data: { amount: 2, reference: 'bonus' } },
];

const withdrawals: TestEvent[] = [
  { stream: 'account-1', type: 'withdrawal.made', data: { amount: 4 } },
  { stream: 'loan-1', type: 'loan.granted', data: { amount: 100 } },
];

/** The events per stream, in order: what the versions of each entity are. */
function perStream(events: readonly TestEvent[]): Map<string, TestEvent[]> {
  const out = new Map<string, TestEvent[]>();
  for (const e of events) out.set(e.stream, [...(out.get(e.stream) ?? []), e]);
  return out;
}

/** Balances of deposits only: its filter takes `deposit.made` and nothing else. */
const depositsOnly: ConsumerFactory<SqliteTarget> = (source, target, { version }) => {
  target.db.exec(
    `CREATE TABLE IF NOT EXISTS deposits_v${version} (account TEXT PRIMARY KEY, total INTEGER NOT NULL)`,
  );
  const add = target.db.prepare(
    `INSERT INTO deposits_v${version} VALUES (?, ?) ON CONFLICT (account) DO UPDATE SET total = total + excluded.total`,
  );
  return createConsumer<Database.Database>({
    name: `deposits_v${version}`,
    source,
    target,
    filter: { types: ['deposit.made'] },
    handle: (e) => {
      if (e.type !== 'deposit.made') throw new Error(`${e.type} is outside the filter`);
      add.run(e.stream, (e.data as { amount: number }).amount);
    },
  });
};

const readDeposits = (target: SqliteTarget, { version }: { version: number }): unknown =>
  target.db.prepare(`SELECT * FROM deposits_v${version} ORDER BY account`).all();

describe('verifyConsumer with samples', () => {
  it('derives the same history from the same seed: several entities per sample stream, types in the filter', async () => {
    const samples = [...deposits, ...withdrawals];
    const filter = { types: ['deposit.made'] };
    const a = await deriveHistory(samples, filter, 42);
    const b = await deriveHistory(samples, filter, 42);
    assert.deepEqual(a, b);
    assert.deepEqual(a.derivation, { seed: 42, samples: 6, used: 4, filter });
    assert.ok(a.events.length >= 30, `${a.events.length} events`);
    assert.ok(a.events.every((e) => e.type === 'deposit.made'));
    const datas = deposits.map((d) => JSON.stringify(d.data));
    assert.ok(a.events.every((e) => datas.includes(JSON.stringify(e.data))));
    const streams = [...perStream(a.events).keys()];
    assert.ok(streams.length > 2, streams.join(', '));
    assert.ok(
      streams.every((s) => /^account-[12](-g[123])?$/.test(s)),
      streams.join(', '),
    );
    // An entity built from account-1 only has account-1's samples.
    for (const [s, list] of perStream(a.events))
      for (const e of list)
        assert.ok(
          deposits.some((d) => s.startsWith(d.stream) && JSON.stringify(d.data) === JSON.stringify(e.data)),
        );
    const other = await deriveHistory(samples, filter, 43);
    assert.notDeepEqual(other.events, a.events);
    const byCategory = await deriveHistory(samples, { categories: ['loan'] }, 42);
    assert.ok(byCategory.events.every((e) => e.type === 'loan.granted' && e.stream.startsWith('loan-1')));
  });

  it('a correct consumer holds every statement on a derived history; the report gives the seed', async () => {
    const r = await verifyConsumer<SqliteTarget>({
      consumer: keyCorrect.consumer,
      read: keyCorrect.read,
      samples: deposits,
      seed: 1234,
    });
    assert.equal(r.ok, true, JSON.stringify(r.statements));
    // The example consumer takes `deposit.made` events (its event map's one type).
    const filter = { types: ['deposit.made'] };
    assert.deepEqual(r.derived, { seed: 1234, samples: 4, used: 4, filter });
    const again = await deriveHistory(deposits, filter, 1234);
    assert.equal(r.events, again.events.length);
  });

  it("reads the consumer's filter: only the types it takes are derived", async () => {
    const r = await verifyConsumer<SqliteTarget>({
      consumer: depositsOnly,
      read: readDeposits,
      samples: [...withdrawals, ...deposits],
      seed: 7,
    });
    assert.equal(r.ok, true, JSON.stringify(r.statements));
    assert.deepEqual(r.derived, { seed: 7, samples: 6, used: 4, filter: { types: ['deposit.made'] } });
  });

  it('catches a dedup key from a payload field with samples only, shrunk to two deposits, replayed by its seed', async () => {
    const run = () =>
      verifyConsumer<SqliteTarget>({
        consumer: keyBroken.consumer,
        read: keyBroken.read,
        samples: deposits,
        seed: 99,
        shrinkRuns: 25,
      });
    const r = await run();
    assert.equal(r.ok, false);
    const s = r.statements.find((x) => x.id === 'stable-keys')!;
    assert.equal(s.verdict, 'fails');
    const f = s.failure!;
    assert.equal(f.scenario, 'clean');
    assert.match(f.message, /two different facts share a dedup key and one is lost/);
    assert.equal(f.shrink.from, r.events);
    assert.equal(f.events.length, 2);
    const [a, b] = f.events as [TestEvent, TestEvent];
    assert.equal((a.data as { reference: string }).reference, (b.data as { reference: string }).reference);
    const replay = await run();
    assert.deepEqual(replay.statements.find((x) => x.id === 'stable-keys')!.failure!.events, f.events);
  });

  it('refuses a run with neither events nor samples, naming both, and bad samples or seeds', async () => {
    const { consumer, read } = keyCorrect;
    await assert.rejects(verifyConsumer<SqliteTarget>({ consumer, read }), {
      code: 'invalid_input',
      message: /^events: is missing, and so is samples: give events .* or samples /,
    });
    await assert.rejects(
      verifyConsumer<SqliteTarget>({ consumer, read, events: deposits, samples: deposits }),
      /samples: must not be given with events/,
    );
    await assert.rejects(
      verifyConsumer<SqliteTarget>({ consumer, read, events: deposits, seed: 1 }),
      /seed: only applies with samples/,
    );
    await assert.rejects(
      verifyConsumer<SqliteTarget>({ consumer, read, samples: deposits, seed: -1 }),
      /seed: must be an integer from 0 to 2147483647/,
    );
    await assert.rejects(
      verifyConsumer<SqliteTarget>({ consumer, read, samples: [] }),
      /samples: must hold at least one event/,
    );
    await assert.rejects(
      verifyConsumer<SqliteTarget>({ consumer, read, samples: [deposits[0]!, { stream: 'a' } as TestEvent] }),
      /samples\[1\]: must have a string stream and type, and data/,
    );
    await assert.rejects(
      verifyConsumer<SqliteTarget>({ consumer: depositsOnly, read: readDeposits, samples: withdrawals }),
      /samples: must hold at least one event the consumer's filter matches \(filter \{"types":\["deposit.made"\]\}\)/,
    );
    await assert.rejects(
      verifyConsumer<SqliteTarget>({
        consumer: () => {
          throw new Error('no such table');
        },
        read,
        samples: deposits,
      }),
      {
        code: 'invalid_input',
        message: /the consumer fails to start, so its filter cannot be read: no such table/,
      },
    );
  });
});
