// A consumer's own upcasters: applied where events enter the runtime, before the guards.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { createConsumer } from '../../src/consumer/consumer.js';
import type { NewEvent } from '../../src/core/event.js';
import type { Upcasters } from '../../src/core/upcasters.js';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { sqliteTarget } from '../../src/sqlite/target.js';
import { randomConsumer } from '../support/names.js';
import { tempDir } from '../support/tempDir.js';

/** v1 `{ cents }`, v2 `{ amount: { cents, currency } }`. */
const upcasters: Upcasters = {
  'invoice.issued': [
    {
      fromVersion: 1,
      up: (data) => ({ amount: { cents: (data as { cents: number }).cents, currency: 'EUR' } }),
    },
  ],
};

const v2 = (cents: number, currency = 'EUR'): NewEvent => ({
  type: 'invoice.issued',
  data: { amount: { cents, currency } },
  metadata: { schemaVersion: 2 },
});

/** Runs a projection consumer (totals by currency, with the entity-version guard) over `log` and returns the totals. */
async function rebuild(log: [string, NewEvent[]][], withUpcasters: boolean): Promise<Record<string, number>> {
  const dir = tempDir();
  const store = createMemoryStore();
  const db = new Database(dir.file('target.db'));
  try {
    for (const [stream, events] of log) await store.append(stream, events);
    db.exec('CREATE TABLE totals (currency TEXT PRIMARY KEY, cents INTEGER NOT NULL)');
    const consumer = createConsumer<Database.Database>({
      name: randomConsumer('totals'),
      source: store,
      target: sqliteTarget(db),
      guard: ['event-id', 'entity-version'],
      ...(withUpcasters ? { upcasters } : {}),
      handle: (event, ctx) => {
        const { cents, currency } = (event.data as { amount: { cents: number; currency: string } }).amount;
        ctx.tx
          .prepare(
            'INSERT INTO totals VALUES (?, ?) ON CONFLICT (currency) DO UPDATE SET cents = cents + excluded.cents',
          )
          .run(currency, cents);
        return Promise.resolve();
      },
    });
    await consumer.start();
    try {
      await consumer.whenCaughtUp({ timeoutMs: 30_000 });
    } finally {
      await consumer.stop();
    }
    const rows = db.prepare('SELECT currency, cents FROM totals ORDER BY currency').all() as {
      currency: string;
      cents: number;
    }[];
    return Object.fromEntries(rows.map((r) => [r.currency, r.cents]));
  } finally {
    db.close();
    await store.close();
    await dir.cleanup();
  }
}

describe('consumer upcasters', () => {
  it('a projection rebuilt over a log of both shapes equals one over the upcast events', async () => {
    const mixed: [string, NewEvent[]][] = [
      ['invoice-1', [{ type: 'invoice.issued', data: { cents: 100 } }, v2(50, 'USD')]],
      ['invoice-2', [v2(7), { type: 'invoice.issued', data: { cents: 30 } }]],
    ];
    const upcast: [string, NewEvent[]][] = [
      ['invoice-1', [v2(100), v2(50, 'USD')]],
      ['invoice-2', [v2(7), v2(30)]],
    ];
    const fromMixed = await rebuild(mixed, true);
    assert.deepEqual(fromMixed, { EUR: 137, USD: 50 });
    assert.deepEqual(fromMixed, await rebuild(upcast, false));
  });
});
