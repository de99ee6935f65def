import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type Database from 'better-sqlite3';
import { createConsumer } from '../../src/consumer/consumer.js';
import type { EventOf } from '../../src/consumer/options.js';
import { randomConsumer, randomStream } from '../support/names.js';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { sqliteTarget } from '../../src/sqlite/target.js';
import { tempDir } from '../support/tempDir.js';

interface Invoices {
  'invoice.issued': { amount: number };
  'invoice.paid': { paid: number; late: boolean };
}

describe('typed consumer options (an event map as type parameter)', () => {
  it('types filter.types and the events the handlers get; a handler reads data without casts', async () => {
    const dir = tempDir();
    const store = createMemoryStore();
    const target = sqliteTarget(dir.file('target.db'));
    try {
      const s = randomStream('invoice');
      await store.append(s, [
        { type: 'invoice.issued', data: { amount: 30 } },
        { type: 'invoice.noted', data: { text: 'not for billing' } },
        { type: 'invoice.paid', data: { paid: 20, late: true } },
      ]);
      const seen: string[] = [];
      const c = createConsumer<Database.Database, Invoices>({
        name: randomConsumer('typed'),
        source: store,
        target,
        filter: { types: ['invoice.issued', 'invoice.paid'] },
        handle: (event) => {
          // `event.type` narrows `event.data`: no cast.
          if (event.type === 'invoice.issued') seen.push(`issued ${event.data.amount}`);
          else seen.push(`paid ${event.data.paid}${event.data.late ? ' late' : ''}`);
        },
      });
      await c.start();
      await c.whenCaughtUp();
      await c.stop();
      assert.deepEqual(seen, ['issued 30', 'paid 20 late']);

      const batches: number[] = [];
      const b = createConsumer<Database.Database, Invoices>({
        name: randomConsumer('typed_batch'),
        source: store,
        target,
        filter: { types: ['invoice.issued'] },
        handleBatch: (events: EventOf<Invoices>[]) => {
          for (const e of events) if (e.type === 'invoice.issued') batches.push(e.data.amount);
        },
      });
      await b.start();
      await b.whenCaughtUp();
      await b.stop();
      assert.deepEqual(batches, [30]);

      // What the compiler refuses (`npm run typecheck` checks each expected error); of these, only
      // both handlers at once can be seen at run time, where a JavaScript caller gets the same refusal.
      const base = { name: randomConsumer('refused'), source: store, target };
      const refused = {
        outsideMap: () =>
          createConsumer<Database.Database, Invoices>({
            ...base,
            // @ts-expect-error 'invoice.noted' is not a type of the map.
            filter: { types: ['invoice.noted'] },
            handle: () => undefined,
          }),
        // @ts-expect-error With an event map, the filter names the types.
        noFilter: () => createConsumer<Database.Database, Invoices>({ ...base, handle: () => undefined }),
        both: () =>
          // @ts-expect-error `handle` or `handleBatch`, not both.
          createConsumer({ ...base, handle: () => undefined, handleBatch: () => undefined }),
      };
      assert.throws(refused.both, { code: 'invalid_input', field: 'handleBatch' });
    } finally {
      await target.close();
      await store.close();
      await dir.cleanup();
    }
  });
});
