import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createConsumer } from '../../../src/consumer/consumer.js';
import type { BatchHandler, BatchHandlerContext } from '../../../src/consumer/options.js';
import type { RecordedEvent } from '../../../src/core/event.js';
import { randomStream } from '../../support/names.js';
import { until } from '../../support/until.js';
import { faultySource, faultyTarget } from '../support/faults.js';
import { withHarness, type Harness } from '../support/harness.js';
import type { MakeTargetFixture } from '../support/targetFixture.js';

const amountOf = (e: RecordedEvent): number => (e.data as { amount: number }).amount;

interface Call {
  positions: number[];
  attempt: number;
  recovered: number[];
}

/** A batch handler that adds every event's amount through `ctx.tx`, records its calls, and runs `check` per event first. */
function recordingBatch<Tx>(
  h: Harness<Tx>,
  calls: Call[],
  check: (e: RecordedEvent, ctx: BatchHandlerContext<Tx>) => Promise<void> | void = () => undefined,
): BatchHandler<Tx> {
  return async (events, ctx) => {
    calls.push({
      positions: events.map((e) => e.position),
      attempt: ctx.attempt,
      recovered: [...ctx.recovered],
    });
    for (const e of events) {
      await check(e, ctx);
      await h.fx.add(ctx.tx, h.table, e.stream, amountOf(e));
    }
  };
}

/** `handleBatch`: the new events of a batch in one call, with failing events isolated by bisection. */
export function describeBatchHandler<Tx>(label: string, make: MakeTargetFixture<Tx>): void {
  describe(`consumer batch handler (${label})`, () => {
    it('while catching up, pages merge into transactions of up to batch.catchUpSize events; once live, each delivery is its own', () =>
      withHarness(make, async (h) => {
        const streams = [randomStream('invoice'), randomStream('invoice'), randomStream('invoice')];
        const expected = await h.appendAmounts(streams, 20); // 60 events: pages of 7 (8 full, then 4)
        const calls: Call[] = [];
        const c = h.consumer({ handleBatch: recordingBatch(h, calls), batch: { size: 7, catchUpSize: 21 } });
        await c.start();
        await c.whenCaughtUp();
        assert.deepEqual(await h.totals(), expected);
        assert.deepEqual(
          calls.map((call) => call.positions.length),
          [21, 21, 18],
          'three pages per transaction, never more than catchUpSize, and the last partial page with them',
        );
        assert.deepEqual(
          calls.flatMap((call) => call.positions),
          Array.from({ length: 60 }, (_, i) => i + 1),
        );
        assert.equal(c.metrics().batches, 3);
        assert.equal((await h.fx.target.readCheckpoint(h.name)).position, 60);
        assert.equal((await h.store.consumers.get(h.name)).position, 60);

        // Live: appends arriving one by one are handled as they come, not held back to fill a batch.
        calls.length = 0;
        for (let i = 1; i <= 3; i++) {
          await h.store.append(streams[0]!, [{ type: 'amount.added', data: { amount: 1 } }]);
          await until(async () => (await h.fx.target.readCheckpoint(h.name)).position === 60 + i, {
            timeoutMs: 10_000,
            message: `live event ${i} handled without waiting for more`,
          });
        }
        assert.deepEqual(
          calls.map((call) => call.positions),
          [[61], [62], [63]],
        );
        await c.stop();
      }));

    it('merges catch-up pages up to 2,000 events by default (batch.size 500)', () =>
      withHarness(make, async (h) => {
        const s = randomStream('invoice');
        const expected = await h.appendAmounts([s], 1200);
        const calls: Call[] = [];
        const c = h.consumer({ handleBatch: recordingBatch(h, calls) });
        await c.start();
        await c.whenCaughtUp();
        assert.deepEqual(await h.totals(), expected);
        assert.deepEqual(
          calls.map((call) => call.positions.length),
          [1200],
          'three pages of 500 in one transaction',
        );
        await c.stop();
      }));

    it('after a failed transaction, catch-up transactions halve (down to batch.size) and double back after each commit', () =>
      withHarness(make, async (h) => {
        const expected = await h.appendAmounts([randomStream('invoice'), randomStream('invoice')], 60);
        const calls: Call[] = [];
        const faults = { failRecords: 2 };
        const c = h.consumer({
          handleBatch: recordingBatch(h, calls),
          target: faultyTarget(h.fx.target, faults),
          batch: { size: 5, catchUpSize: 40 },
          reconnect: { initialDelayMs: 1, maxDelayMs: 5 },
        });
        await c.start();
        await c.whenCaughtUp();
        assert.equal(faults.failRecords, 0);
        assert.deepEqual(
          calls.map((call) => call.positions.length),
          [40, 20, 10, 20, 40, 40, 10],
          'two failed transactions (40, then 20 events), then 10, 20, 40 and 40 commit, and the last 10',
        );
        assert.deepEqual(
          calls.slice(2).flatMap((call) => call.positions),
          Array.from({ length: 120 }, (_, i) => i + 1),
        );
        assert.deepEqual(await h.totals(), expected);
        assert.equal(await h.fx.target.ledgerSize(h.name), 120);
        assert.equal(c.metrics().reconnects, 2);
        await c.stop();
      }));

    it('a target that cuts every transaction of more than 10 events still gets every event, 10 at a time', () =>
      withHarness(make, async (h) => {
        const expected = await h.appendAmounts([randomStream('invoice'), randomStream('invoice')], 30);
        const calls: Call[] = [];
        const c = h.consumer({
          handleBatch: recordingBatch(h, calls),
          target: faultyTarget(h.fx.target, { failRecordsOver: 10 }),
          batch: { size: 5, catchUpSize: 40 },
          reconnect: { initialDelayMs: 1, maxDelayMs: 5 },
        });
        await c.start();
        await c.whenCaughtUp({ timeoutMs: 60_000 });
        assert.deepEqual(await h.totals(), expected);
        assert.equal(await h.fx.target.ledgerSize(h.name), 60);
        // A fixed 40-event transaction would fail forever; each commit of 10 is followed by one cut
        // transaction of 20 (the size doubled back), which halves it again; the last 10 fit in one.
        assert.deepEqual(
          calls.map((call) => call.positions.length),
          [40, 20, 10, 20, 10, 20, 10, 20, 10, 20, 10, 10],
        );
        assert.equal(c.metrics().reconnects, 6);
        await c.stop();
      }));

    it('gets the new events of a batch in one call, in order; output, ledger and checkpoint commit together; duplicates never reach it', () =>
      withHarness(make, async (h) => {
        const streams = [randomStream('invoice'), randomStream('invoice'), randomStream('invoice')];
        const expected = await h.appendAmounts(streams, 10);
        const calls: Call[] = [];
        const c = h.consumer({ handleBatch: recordingBatch(h, calls), batch: { size: 500 } });
        await c.start();
        await c.whenCaughtUp();
        assert.deepEqual(await h.totals(), expected);
        assert.equal(await h.fx.target.ledgerSize(h.name), 30);
        assert.equal((await h.fx.target.readCheckpoint(h.name)).position, 30);
        const positions = calls.flatMap((call) => call.positions);
        assert.deepEqual(
          positions,
          Array.from({ length: 30 }, (_, i) => i + 1),
          'each event once, in position order',
        );
        assert.ok(calls.length < 30, `events are handled together (${calls.length} calls)`);
        assert.ok(calls.every((call) => call.attempt === 1));
        assert.equal(c.metrics().processed, 30);
        await c.stop();

        // Redelivered history: the rewound cursor and the ledger keep every event from the handler.
        await h.store.consumers.reset(h.name, 0);
        await h.fx.target.transaction(async (t) => {
          await t.checkpoint(h.name);
          await t.record(h.name, { entries: [], versions: new Map(), position: 0, epoch: 0 });
        });
        const again: Call[] = [];
        const c2 = h.consumer({ handleBatch: recordingBatch(h, again) });
        await c2.start();
        await c2.whenCaughtUp();
        assert.deepEqual(await h.totals(), expected);
        assert.deepEqual(again, [], 'no duplicate reached the batch handler');
        assert.equal(c2.metrics().duplicates, 30);
      }));

    it("isolates a failing event by bisection: 'dead-letter' parks it and its entity's later events, the rest of the batch commits", () =>
      withHarness(make, async (h) => {
        const bad = randomStream('invoice');
        const good = randomStream('invoice');
        const expected = await h.appendAmounts(
          [bad, good, randomStream('invoice'), randomStream('invoice')],
          8,
        );
        const badEvents: RecordedEvent[] = [];
        for await (const e of h.store.readStream(bad)) badEvents.push(e);
        const poison = badEvents[2]!;
        let broken = true;
        const calls: Call[] = [];
        const c = h.consumer({
          onError: { attempts: 3, then: 'dead-letter' },
          handleBatch: recordingBatch(h, calls, (e) => {
            if (broken && e.id === poison.id) throw new Error('invoice 3 is malformed');
          }),
        });
        await c.start();
        await c.whenCaughtUp();
        const totals = await h.totals();
        assert.equal(totals.get(good), expected.get(good), 'the healthy entities are complete');
        assert.equal(
          totals.get(bad),
          amountOf(badEvents[0]!) + amountOf(badEvents[1]!),
          'the broken entity stops before version 3',
        );
        const letters = await h.store.deadLetters.list(h.name);
        assert.deepEqual(
          letters.map((l) => l.event.version),
          [3, 4, 5, 6, 7, 8],
        );
        assert.equal(letters[0]!.attempts, 3);
        assert.match(letters[0]!.error?.message ?? '', /malformed/);
        // The poison event was tried alone for its retries (attempts 2 and 3), after the bisection found it.
        const alone = calls.filter(
          (call) => call.positions.length === 1 && call.positions[0] === poison.position,
        );
        assert.deepEqual(
          alone.map((call) => call.attempt),
          [1, 2, 3],
        );
        assert.ok(
          calls.length <= 20,
          `bisection, not one call per event (${calls.length} calls for 32 events)`,
        );
        const m = c.metrics();
        assert.equal(m.deadLetters, 1);
        assert.equal(m.processed, 32 - 6);

        broken = false;
        assert.equal(await h.store.deadLetters.retry(h.name, { stream: bad }), 6);
        await until(async () => (await h.store.deadLetters.list(h.name)).length === 0, {
          message: 'dead letters resolved',
        });
        assert.deepEqual(await h.totals(), expected);
      }));

    it("then: 'stop' commits the events before the failing one, fails, and keeps the cursor before it", () =>
      withHarness(make, async (h) => {
        const a = randomStream('invoice');
        const b = randomStream('invoice');
        await h.appendAmounts([a, b], 6);
        const events: RecordedEvent[] = [];
        for await (const e of h.store.readAll()) events.push(e);
        const poison = events[6]!;
        const calls: Call[] = [];
        const c = h.consumer({
          onError: { attempts: 2, then: 'stop' },
          handleBatch: recordingBatch(h, calls, (e) => {
            if (e.id === poison.id) throw new Error('cannot bill this invoice');
          }),
        });
        await c.start();
        await until(() => c.status().state === 'failed', { message: 'consumer failed' });
        const expected = new Map<string, number>();
        for (const e of events.slice(0, 6))
          expected.set(e.stream, (expected.get(e.stream) ?? 0) + amountOf(e));
        assert.deepEqual(await h.totals(), expected);
        assert.equal(c.status().position, poison.position - 1);
        assert.equal(c.status().failedEvent?.id, poison.id);
        assert.match(c.status().lastError?.message ?? '', /cannot bill/);
        assert.equal((await h.fx.target.readCheckpoint(h.name)).position, poison.position - 1);
        assert.equal(await h.fx.target.ledgerSize(h.name), 6);
      }));

    it('a statement that fails in the database rolls back to the savepoint; the failing event is parked alone', () =>
      withHarness(make, async (h) => {
        const bad = randomStream('invoice');
        const good = randomStream('invoice');
        const expected = await h.appendAmounts([bad, good], 3);
        const calls: Call[] = [];
        const c = h.consumer({
          onError: { attempts: 1, then: 'dead-letter' },
          handleBatch: recordingBatch(h, calls, async (e, ctx) => {
            if (e.stream === bad && e.version === 3) await h.fx.badSql(ctx.tx, h.table);
          }),
        });
        await c.start();
        await c.whenCaughtUp();
        const totals = await h.totals();
        assert.equal(totals.get(good), expected.get(good));
        assert.equal(totals.has('bad'), false, 'the failed statement left nothing');
        const letters = await h.store.deadLetters.list(h.name);
        assert.deepEqual(
          letters.map((l) => [l.event.stream, l.event.version, l.attempts]),
          [[bad, 3, 1]],
        );
        // attempts: 1: the bisection's try alone is the only one.
        assert.equal(
          calls.filter(
            (call) => call.positions.length === 1 && call.positions[0] === letters[0]!.event.position,
          ).length,
          1,
        );
      }));

    it('gap recovery hands the recovered events to the batch handler in order, marked in ctx.recovered', () =>
      withHarness(make, async (h) => {
        const gappy = randomStream('invoice');
        const other = randomStream('invoice');
        const expected = await h.appendAmounts([gappy, other], 5);
        const hidden: number[] = [];
        for await (const e of h.store.readStream(gappy))
          if (e.version === 2 || e.version === 3) hidden.push(e.position);
        const calls: Call[] = [];
        const c = h.consumer({
          guard: 'entity-version',
          source: faultySource(h.store, {
            hide: (e) => e.stream === gappy && (e.version === 2 || e.version === 3),
          }),
          handleBatch: recordingBatch(h, calls),
        });
        await c.start();
        await c.whenCaughtUp();
        assert.deepEqual(await h.totals(), expected);
        // Delivered: 1, 2, 4, 6, 7... (the gappy stream's v2 and v3, at 3 and 5, hidden); they are read
        // back and handled before its v4 (position 7), as with `handle`.
        const positions = calls.flatMap((call) => call.positions);
        assert.deepEqual(positions, [1, 2, 4, 6, 3, 5, 7, 8, 9, 10]);
        assert.deepEqual(
          calls.flatMap((call) => call.recovered).sort((x, y) => x - y),
          hidden,
        );
        assert.equal(c.metrics().recovered, 2);
      }));

    it('takes either handle or handleBatch, not both', () =>
      withHarness(make, (h) => {
        const base = { name: h.name, source: h.store, target: h.fx.target };
        assert.throws(
          // @ts-expect-error The compiler refuses both; the runtime check is for JavaScript callers.
          () => createConsumer({ ...base, handle: () => undefined, handleBatch: () => undefined }),
          {
            code: 'invalid_input',
            field: 'handleBatch',
          },
        );
        assert.throws(() => createConsumer({ ...base, handleBatch: 'no' as never }), {
          code: 'invalid_input',
          field: 'handleBatch',
        });
        // @ts-expect-error The compiler refuses neither, as the runtime does.
        assert.throws(() => createConsumer({ ...base }), { code: 'invalid_input', field: 'handle' });
        return Promise.resolve();
      }));
  });
}
