import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createConsumer } from '../../../src/consumer/consumer.js';
import type { RecordedEvent } from '../../../src/core/event.js';
import { randomStream } from '../../support/names.js';
import { faultySource, faultyTarget, type SourceFaults, type TargetFaults } from '../support/faults.js';
import { withHarness } from '../support/harness.js';
import type { MakeTargetFixture } from '../support/targetFixture.js';

/** The ledger in the output transaction, and the guards. */
export function describeLedgerAndGuards<Tx>(label: string, make: MakeTargetFixture<Tx>): void {
  describe(`consumer ledger and guards (${label})`, () => {
    it('handles every event once, with one ledger row per event and the checkpoint at the last position', () =>
      withHarness(make, async (h) => {
        const streams = [randomStream('invoice'), randomStream('invoice'), randomStream('invoice')];
        const expected = await h.appendAmounts(streams, 20);
        const c = h.consumer({ batch: { size: 7, catchUpSize: 7 } });
        await c.start();
        await c.whenCaughtUp();
        assert.deepEqual(await h.totals(), expected);
        assert.equal(await h.fx.target.ledgerSize(h.name), 60);
        assert.equal((await h.fx.target.readCheckpoint(h.name)).position, 60);
        assert.equal((await h.store.consumers.get(h.name)).position, 60);
        const m = c.metrics();
        assert.equal(m.delivered, 60);
        assert.equal(m.processed, 60);
        assert.equal(m.duplicates, 0);
        assert.ok(m.batches >= 9, `size 7 over 60 events needs at least 9 batches, got ${m.batches}`);
      }));

    it('a crash before the commit repeats the batch safely (nothing doubles)', () =>
      withHarness(make, async (h) => {
        const streams = [randomStream('invoice'), randomStream('invoice')];
        const expected = await h.appendAmounts(streams, 10);
        const faults: TargetFaults = { failRecords: 2 };
        const c = h.consumer({ target: faultyTarget(h.fx.target, faults), batch: { size: 5 } });
        await c.start();
        await c.whenCaughtUp();
        assert.equal(faults.failRecords, 0);
        assert.deepEqual(await h.totals(), expected);
        assert.equal(await h.fx.target.ledgerSize(h.name), 20);
        assert.ok(c.metrics().reconnects >= 2);
      }));

    it('a crash after the commit and before the ack skips the redelivery as duplicates', () =>
      withHarness(make, async (h) => {
        const streams = [randomStream('invoice'), randomStream('invoice')];
        const expected = await h.appendAmounts(streams, 10);
        const faults: SourceFaults = { failAcks: 1 };
        const c = h.consumer({ source: faultySource(h.store, faults) });
        await c.start();
        await c.whenCaughtUp();
        assert.deepEqual(await h.totals(), expected);
        assert.equal(await h.fx.target.ledgerSize(h.name), 20);
        const m = c.metrics();
        assert.equal(m.processed, 20);
        assert.equal(m.duplicates, 20, 'the whole unacknowledged batch came again and was skipped');
        assert.equal(m.delivered, 40);
        assert.equal(m.reconnects, 1);
      }));

    it('a rewound cursor redelivers history that the checkpoint skips without a ledger lookup', () =>
      withHarness(make, async (h) => {
        const expected = await h.appendAmounts([randomStream('invoice')], 15);
        const first = h.consumer();
        await first.start();
        await first.whenCaughtUp();
        await first.stop();
        await h.store.consumers.reset(h.name, 0);
        const faults: TargetFaults = { lookups: { keys: 0, versions: 0 } };
        const again = h.consumer({ target: faultyTarget(h.fx.target, faults) });
        await again.start();
        await again.whenCaughtUp();
        assert.deepEqual(await h.totals(), expected);
        assert.equal(again.metrics().duplicates, 15);
        assert.equal(faults.lookups?.keys, 0);
      }));

    it("'event-id' skips events whose id the ledger already holds", () =>
      withHarness(make, async (h) => {
        const s = randomStream('invoice');
        await h.appendAmounts([s], 4);
        const events: RecordedEvent[] = [];
        for await (const e of h.store.readStream(s)) events.push(e);
        // Another process already handled events 1 and 3 (ledger rows without a checkpoint move).
        await h.fx.target.migrate();
        await h.fx.target.transaction((t) =>
          t.record(h.name, {
            entries: [events[0]!, events[2]!].map((e) => ({ key: `event:${e.id}`, position: e.position })),
            versions: new Map(),
            position: 0,
            epoch: 0,
          }),
        );
        const c = h.consumer({ guard: 'event-id' });
        await c.start();
        await c.whenCaughtUp();
        const amount = (e: RecordedEvent): number => (e.data as { amount: number }).amount;
        assert.deepEqual(await h.totals(), new Map([[s, amount(events[1]!) + amount(events[3]!)]]));
        assert.equal(c.metrics().duplicates, 2);
        assert.equal(await h.fx.target.ledgerSize(h.name), 4);
      }));

    it("'command-id' handles one event per command, and an event without one is an error", () =>
      withHarness(make, async (h) => {
        const s = randomStream('invoice');
        await h.store.append(s, [
          { type: 'paid', data: { amount: 5 }, metadata: { commandId: 'cmd-1' } },
          { type: 'paid', data: { amount: 5 }, metadata: { commandId: 'cmd-1' } },
          { type: 'paid', data: { amount: 7 }, metadata: { commandId: 'cmd-2' } },
        ]);
        await h.store.append(s, [{ type: 'paid', data: { amount: 100 } }]);
        const c = h.consumer({ guard: 'command-id', onError: { then: 'stop' } });
        await c.start();
        await assert.rejects(c.whenCaughtUp(), /metadata\.commandId/);
        assert.deepEqual(await h.totals(), new Map([[s, 12]]));
        const st = c.status();
        assert.equal(st.state, 'failed');
        assert.equal(st.failedEvent?.position, 4);
        assert.equal(st.position, 3);
        const info = await h.store.consumers.get(h.name);
        assert.equal(info.status, 'failed');
        assert.equal(info.position, 3);
        assert.equal(info.failedEvent?.position, 4);
        assert.match(info.lastError?.message ?? '', /commandId/);
        assert.equal(c.metrics().duplicates, 1);
      }));

    it('a custom key guard handles one event per key', () =>
      withHarness(make, async (h) => {
        const s = randomStream('payment');
        for (const [paymentId, amount] of [
          ['p1', 3],
          ['p2', 4],
          ['p1', 3],
          ['p3', 5],
          ['p2', 4],
        ] as const) {
          await h.store.append(s, [{ type: 'payment.received', data: { amount, paymentId } }]);
        }
        const c = h.consumer({
          guard: { key: (e) => (e.data as { paymentId: string }).paymentId, name: 'payment' },
        });
        await c.start();
        await c.whenCaughtUp();
        assert.deepEqual(await h.totals(), new Map([[s, 12]]));
        assert.equal(c.metrics().duplicates, 2);
        assert.equal(await h.fx.target.ledgerSize(h.name), 3);
      }));

    it("'entity-version' skips versions at or below the last applied one, and combines with 'event-id'", () =>
      withHarness(make, async (h) => {
        const a = randomStream('invoice');
        const b = randomStream('invoice');
        await h.appendAmounts([a, b], 4);
        await h.fx.target.migrate();
        await h.fx.target.transaction((t) =>
          t.record(h.name, { entries: [], versions: new Map([[a, 2]]), position: 0, epoch: 0 }),
        );
        const lookups = { keys: 0, versions: 0, keysAsked: [] as string[] };
        const c = h.consumer({
          guard: ['entity-version', 'event-id'],
          target: faultyTarget(h.fx.target, { lookups }),
        });
        await c.start();
        await c.whenCaughtUp();
        const totals = await h.totals();
        // Events the entity versions already call duplicates (a v1, v2) are not looked up in the ledger.
        const ids = new Map<string, string>();
        for await (const e of h.store.readAll())
          ids.set(`event:${e.id}`, `${e.stream === a ? 'a' : 'b'}${e.version}`);
        assert.deepEqual(lookups.keysAsked.map((k) => ids.get(k)).sort(), [
          'a3',
          'a4',
          'b1',
          'b2',
          'b3',
          'b4',
        ]);
        const all = new Map<string, number[]>();
        for await (const e of h.store.readAll())
          all.set(e.stream, [...(all.get(e.stream) ?? []), (e.data as { amount: number }).amount]);
        const sum = (xs: number[]): number => xs.reduce((x, y) => x + y, 0);
        assert.equal(totals.get(a), sum(all.get(a)!.slice(2)));
        assert.equal(totals.get(b), sum(all.get(b)!));
        assert.equal(c.metrics().duplicates, 2);
        assert.equal(await h.fx.target.ledgerSize(h.name), 6, 'ledger rows for the 6 handled events');
        const st = await h.fx.target.transaction((t) => t.entityVersions(h.name, [a, b]));
        assert.deepEqual(
          st,
          new Map([
            [a, 4],
            [b, 4],
          ]),
        );
      }));

    it('rejects bad options with invalid_input naming the field', () =>
      withHarness(make, (h) => {
        const base = { name: h.name, source: h.store, target: h.fx.target, handle: h.addAmount };
        assert.throws(() => createConsumer({ ...base, name: 'bad name!' }), {
          code: 'invalid_input',
          field: 'name',
        });
        assert.throws(() => createConsumer({ ...base, guard: 'nope' as never }), {
          code: 'invalid_input',
          field: 'guard',
        });
        assert.throws(() => createConsumer({ ...base, batch: { size: 0 } }), {
          code: 'invalid_input',
          field: 'batch.size',
        });
        assert.throws(() => createConsumer({ ...base, batch: { catchUpSize: 0 } }), {
          code: 'invalid_input',
          field: 'batch.catchUpSize',
        });
        assert.throws(() => createConsumer({ ...base, batch: { size: 50, catchUpSize: 20 } }), {
          code: 'invalid_input',
          field: 'batch.catchUpSize',
          message: /at least batch\.size \(50\)/,
        });
        assert.throws(() => createConsumer({ ...base, batch: 5 as never }), {
          code: 'invalid_input',
          field: 'batch',
        });
        assert.throws(() => createConsumer({ ...base, onError: { then: 'ignore' as never } }), {
          code: 'invalid_input',
          field: 'onError.then',
        });
        assert.throws(() => createConsumer({ ...base, gaps: 'skip' as never }), {
          code: 'invalid_input',
          field: 'gaps',
        });
        return Promise.resolve();
      }));
  });
}
