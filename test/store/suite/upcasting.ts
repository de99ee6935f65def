import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { NewEvent, RecordedEvent } from '../../../src/core/event.js';
import type { JsonValue } from '../../../src/core/json.js';
import type { Upcasters } from '../../../src/core/upcasters.js';
import { randomCategory, randomConsumer } from '../../support/names.js';
import { appendRaw, collect, rejectsWith, withStore, type MakeStore } from './context.js';

/**
 * `invoice.issued` in three shapes: v1 `{ amount }` in cents (euros implied, no schemaVersion), v2
 * `{ amount: { cents, currency } }`, v3 `{ total: { cents, currency } }`.
 */
export const invoiceUpcasters: Upcasters = {
  'invoice.issued': [
    { fromVersion: 2, up: (data) => ({ total: (data as { amount: JsonValue }).amount }) },
    {
      fromVersion: 1,
      up: (data) => ({ amount: { cents: (data as { amount: number }).amount, currency: 'EUR' } }),
    },
  ],
};

/** The same three invoices in each shape, and as v3 (what the upcasters make of them). */
const v1: NewEvent = { type: 'invoice.issued', data: { amount: 1250 } };
const v2: NewEvent = {
  type: 'invoice.issued',
  data: { amount: { cents: 900, currency: 'USD' } },
  metadata: { schemaVersion: 2, correlationId: 'c-2' },
};
const v3: NewEvent = {
  type: 'invoice.issued',
  data: { total: { cents: 75, currency: 'EUR' } },
  metadata: { schemaVersion: 3 },
};
const asV3: NewEvent[] = [
  {
    type: 'invoice.issued',
    data: { total: { cents: 1250, currency: 'EUR' } },
    metadata: { schemaVersion: 3 },
  },
  {
    type: 'invoice.issued',
    data: { total: { cents: 900, currency: 'USD' } },
    metadata: { schemaVersion: 3, correlationId: 'c-2' },
  },
  v3,
];
const paid: NewEvent = { type: 'invoice.paid', data: { cents: 1250 } };

/** A projection: totals by currency, and the paid sum. */
function project(events: RecordedEvent[]): Record<string, number> {
  const totals: Record<string, number> = {};
  for (const e of events) {
    if (e.type === 'invoice.issued') {
      const { cents, currency } = (e.data as { total: { cents: number; currency: string } }).total;
      totals[currency] = (totals[currency] ?? 0) + cents;
    } else if (e.type === 'invoice.paid')
      totals.paid = (totals.paid ?? 0) + (e.data as { cents: number }).cents;
  }
  return totals;
}

const content = (e: RecordedEvent) => ({ type: e.type, data: e.data, metadata: e.metadata });

export function upcastingTests(make: MakeStore): void {
  describe('upcasters', () => {
    it('reads old shapes as the latest on readStream and readAll; the stored event never changes', async () => {
      await withStore(
        make,
        async (store) => {
          const cat = randomCategory('invoice');
          const mixed = `${cat}-mixed`;
          const id = randomUUID();
          await store.append(mixed, [{ ...v1, id }, v2, v3, paid]);
          const read = await collect(store.readStream(mixed));
          assert.deepEqual(
            read.map(content),
            [...asV3, { ...paid, metadata: {} }],
            'other types stay as written',
          );
          assert.deepEqual(
            (await collect(store.readAll({ filter: { categories: [cat] } }))).map(content),
            read.map(content),
          );
          // Re-sending the original v1 event is a duplicate: the store still holds it as written.
          const again = await store.append(mixed, [{ ...v1, id }], { expectedVersion: 4 });
          assert.equal(again.duplicate, true);
        },
        { upcasters: invoiceUpcasters },
      );
    });

    it('a projection rebuilt over a log of both shapes equals one over the upcast events', async () => {
      await withStore(
        make,
        async (store) => {
          const cat = randomCategory('invoice');
          await store.append(`${cat}-old`, [v1, v2, paid, v3]);
          await store.append(`${cat}-new`, [asV3[0]!, asV3[1]!, paid, asV3[2]!]);
          const old = project(await collect(store.readStream(`${cat}-old`)));
          assert.deepEqual(old, { EUR: 1325, USD: 900, paid: 1250 });
          assert.deepEqual(old, project(await collect(store.readStream(`${cat}-new`))));
        },
        { upcasters: invoiceUpcasters },
      );
    });

    it('subscriptions deliver the upcast events', async () => {
      await withStore(
        make,
        async (store) => {
          const cat = randomCategory('invoice');
          await store.append(`${cat}-1`, [v1, v2]);
          const sub = await store.subscribe(randomConsumer(), { filter: { categories: [cat] } });
          try {
            const iterator = sub[Symbol.asyncIterator]();
            let delivered: RecordedEvent[] = [];
            while (delivered.length === 0) {
              const r = await iterator.next();
              assert.ok(!r.done, 'the subscription ended before delivering');
              if (r.value.kind === 'events') delivered = r.value.events;
            }
            assert.deepEqual(delivered.map(content), asV3.slice(0, 2));
          } finally {
            await sub.close();
          }
        },
        { upcasters: invoiceUpcasters },
      );
    });

    it('an upcaster that throws fails the read with upcast_failed naming the event', async () => {
      await withStore(
        make,
        async (store) => {
          const stream = `${randomCategory('invoice')}-1`;
          await store.append(stream, [v1]);
          const err = await rejectsWith(collect(store.readStream(stream)), 'upcast_failed');
          assert.match(err.message, /invoice\.issued/);
          assert.equal(err.details.stream, stream);
        },
        {
          upcasters: {
            'invoice.issued': [
              {
                fromVersion: 1,
                up: () => {
                  throw new Error('no amount');
                },
              },
            ],
          },
        },
      );
    });

    it('an append may state a schema version: an integer from 1', async () => {
      await withStore(make, async (store) => {
        const stream = `${randomCategory('invoice')}-1`;
        for (const bad of [0, 1.5, '2', null]) {
          await rejectsWith(
            appendRaw(store, stream, [
              { type: 'invoice.issued', data: {}, metadata: { schemaVersion: bad } },
            ]),
            'invalid_input',
            'events[0].metadata.schemaVersion',
          );
        }
        const ok = await store.append(stream, [
          { type: 'invoice.issued', data: {}, metadata: { schemaVersion: 7 } },
        ]);
        assert.equal(ok.version, 1);
      });
    });

    const bad: [unknown, string][] = [
      [[], 'upcasters'],
      [{ 'invoice.issued': [] }, 'upcasters["invoice.issued"]'],
      [
        { 'invoice.issued': [{ fromVersion: 0, up: () => null }] },
        'upcasters["invoice.issued"][0].fromVersion',
      ],
      [{ 'invoice.issued': [{ fromVersion: 1 }] }, 'upcasters["invoice.issued"][0].up'],
      [
        {
          'invoice.issued': [
            { fromVersion: 1, up: () => null },
            { fromVersion: 3, up: () => null },
          ],
        },
        'upcasters["invoice.issued"]',
      ],
    ];
    for (const [upcasters, field] of bad) {
      it(`refuses upcasters ${JSON.stringify(upcasters)} naming ${field}`, async () => {
        await rejectsWith(
          // Through a promise: a store's factory may throw before returning one.
          Promise.resolve()
            .then(() => make({ upcasters: upcasters as Upcasters }))
            .then((f) => f.cleanup()),
          'invalid_input',
          field,
        );
      });
    }
  });
}
