import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RecordedEvent } from '../../../src/core/event.js';
import type { EventStore } from '../../../src/core/eventStore.js';
import { randomCategory, randomConsumer, randomStream } from '../../support/names.js';
import { nextEvents, nextMessage, Reader, rejectsWith, withStore, type MakeStore } from './context.js';

/** `a-1 b-1 a-2 b-2 a-3 b-3`: two interleaved entities, three events each (positions 1-6). */
async function twoEntities(store: EventStore): Promise<{ a: string; b: string }> {
  const cat = randomCategory();
  const a = `${cat}-a`;
  const b = `${cat}-b`;
  for (let i = 1; i <= 3; i++) {
    await store.append(a, [{ type: 'step', data: { i }, metadata: { commandId: `a${i}` } }]);
    await store.append(b, [{ type: 'step', data: { i } }]);
  }
  return { a, b };
}

function redelivered(reader: Reader): RecordedEvent[] {
  return reader.messages.flatMap((m) => (m.kind === 'events' && m.redelivery ? m.events : []));
}

/** Guarantee 8 of docs/guarantees.md: dead letters, sequenced parking, retry, skip. */
export function parkingTests(makeStore: MakeStore): void {
  describe('parking (dead letters)', () => {
    it('records a parked event with error, stack, attempts and metadata; parks its entity behind it', () =>
      withStore(makeStore, async (store) => {
        const { a, b } = await twoEntities(store);
        const name = randomConsumer();
        const sub = await store.subscribe(name, { batchSize: 1 });
        const it = sub[Symbol.asyncIterator]();
        try {
          const first = (await nextEvents(it)).events[0]!;
          assert.equal(first.stream, a);
          const error = new TypeError('no such invoice');
          const parked = await sub.park(first.position, {
            reason: 'handler failed after 3 attempts',
            error,
            attempts: 3,
          });
          assert.deepEqual(parked, { parkedThrough: first.position }, 'nothing later was delivered yet');
          await sub.ack(first.position);
          const delivered: number[] = [];
          for (;;) {
            const m = await nextMessage(it);
            if (m.kind !== 'events') break;
            for (const e of m.events) delivered.push(e.position);
            await sub.ack(m.events[m.events.length - 1]!.position);
          }
          assert.deepEqual(delivered, [2, 4, 6], 'only entity b is delivered');
          const info = await store.consumers.get(name);
          assert.equal(info.position, 6, 'the cursor moved past the parked events');
          assert.equal(info.parked, 3);
          const letters = await store.deadLetters.list(name);
          assert.deepEqual(
            letters.map((l) => [l.event.position, l.status, l.behind]),
            [
              [1, 'parked', null],
              [3, 'parked', first.id],
              [5, 'parked', first.id],
            ],
          );
          const head = letters[0]!;
          assert.equal(head.reason, 'handler failed after 3 attempts');
          assert.equal(head.attempts, 3);
          assert.equal(head.error?.name, 'TypeError');
          assert.equal(head.error?.message, 'no such invoice');
          assert.match(head.error?.stack ?? '', /no such invoice/);
          assert.deepEqual(head.event.metadata, { commandId: 'a1' });
          assert.equal(head.event.stream, a);
          assert.ok(letters.every((l) => l.event.stream === a && l.consumer === name));
          assert.ok(!letters.some((l) => l.event.stream === b));
        } finally {
          await sub.close();
        }
      }));

    it('parks every event of a blocked entity in a page read after the park, in order, and delivers the rest', () =>
      withStore(makeStore, async (store) => {
        const cat = randomCategory();
        const [a, b] = [`${cat}-a`, `${cat}-b`];
        await store.append(a, [{ type: 'step', data: { i: 1 } }]);
        const name = randomConsumer();
        const sub = await store.subscribe(name, { batchSize: 10 });
        const it = sub[Symbol.asyncIterator]();
        try {
          const first = (await nextEvents(it)).events[0]!;
          assert.deepEqual(await sub.park(first.position, { reason: 'a is broken' }), {
            parkedThrough: first.position,
          });
          // Positions 2-6: a 2, b 1, a 3, a 4, b 2, appended before the next read (one page).
          for (const [s, i] of [
            [a, 2],
            [b, 1],
            [a, 3],
            [a, 4],
            [b, 2],
          ] as const)
            await store.append(s, [{ type: 'step', data: { i } }]);
          const delivered: RecordedEvent[] = [];
          while (delivered.length < 2) delivered.push(...(await nextEvents(it)).events);
          assert.deepEqual(
            delivered.map((e) => [e.stream, e.version]),
            [
              [b, 1],
              [b, 2],
            ],
          );
          await sub.ack(delivered[1]!.position);
          const letters = await store.deadLetters.list(name);
          assert.deepEqual(
            letters.map((l) => [l.event.version, l.status, l.behind]),
            [
              [1, 'parked', null],
              [2, 'parked', first.id],
              [3, 'parked', first.id],
              [4, 'parked', first.id],
            ],
          );
          assert.ok(letters.slice(1).every((l) => /waiting behind/.test(l.reason) && l.attempts === 0));
          assert.equal((await store.consumers.get(name)).position, 6);
        } finally {
          await sub.close();
        }
      }));

    it("parks the entity's later events delivered already, and says through which position", () =>
      withStore(makeStore, async (store) => {
        await twoEntities(store);
        const name = randomConsumer();
        const sub = await store.subscribe(name, { batchSize: 10 });
        const it = sub[Symbol.asyncIterator]();
        try {
          const delivered = (await nextEvents(it)).events.map((e) => e.position);
          assert.deepEqual(delivered, [1, 2, 3, 4, 5, 6]);
          assert.deepEqual(await sub.park(1, { reason: 'a is broken' }), { parkedThrough: 5 });
          assert.deepEqual(await sub.park(4, { reason: 'b is broken' }), { parkedThrough: 6 });
          const letters = await store.deadLetters.list(name);
          assert.deepEqual(
            letters.map((l) => [l.event.position, l.behind === null]),
            [
              [1, true],
              [3, false],
              [4, true],
              [5, false],
              [6, false],
            ],
          );
          await sub.ack(6);
          assert.equal((await store.consumers.get(name)).position, 6);
        } finally {
          await sub.close();
        }
      }));

    it('retries an entity: redelivers its parked events in order, flagged, then delivers it normally again', () =>
      withStore(makeStore, async (store) => {
        const { a } = await twoEntities(store);
        const name = randomConsumer();
        const reader = new Reader(await store.subscribe(name, { batchSize: 1 }), false);
        try {
          await reader.waitForEvents(1);
          await reader.sub.park(1, { reason: 'down' });
          await reader.sub.ack(1);
          await reader.waitFor(() => reader.messages.some((m) => m.kind === 'caught_up'), 'caught_up');
          await reader.sub.ack(6);
          assert.equal(await store.deadLetters.retry(name, { stream: a }), 3);
          assert.deepEqual(
            (await store.deadLetters.list(name)).map((l) => l.status),
            ['retrying', 'retrying', 'retrying'],
          );
          await reader.waitFor(() => redelivered(reader).length === 3, 'three redelivered events');
          assert.deepEqual(
            redelivered(reader).map((e) => [e.stream, e.version]),
            [
              [a, 1],
              [a, 2],
              [a, 3],
            ],
          );
          // Resolving: an ack at or below the cursor resolves the redelivered entries.
          await reader.sub.ack(5);
          assert.deepEqual(await store.deadLetters.list(name), []);
          assert.deepEqual(
            (await store.deadLetters.list(name, { all: true })).map((l) => l.status),
            ['resolved', 'resolved', 'resolved'],
          );
          await store.append(a, [{ type: 'step', data: { i: 4 } }]);
          await reader.waitFor(
            () => reader.events.some((e) => e.stream === a && e.version === 4),
            'a-4 delivered live',
          );
          const last = reader.messages[reader.messages.length - 1]!;
          assert.ok(last.kind === 'events' && !last.redelivery);
        } finally {
          await reader.stop();
        }
      }));

    it('parks new events of an entity being retried as retrying too, so nothing overtakes', () =>
      withStore(makeStore, async (store) => {
        const a = randomStream('ent');
        await store.append(a, [{ type: 'step', data: 1 }]);
        const name = randomConsumer();
        const sub = await store.subscribe(name);
        const it = sub[Symbol.asyncIterator]();
        try {
          await nextEvents(it);
          await sub.park(1, { reason: 'x' });
          await sub.ack(1);
          assert.equal((await nextMessage(it)).kind, 'caught_up');
          await store.deadLetters.retry(name, { stream: a });
          const first = await nextEvents(it);
          assert.equal(first.redelivery, true);
          assert.deepEqual(
            first.events.map((e) => e.version),
            [1],
          );
          // While version 1 is being retried, version 2 commits: it must wait for it.
          await store.append(a, [{ type: 'step', data: 2 }]);
          const second = await nextEvents(it);
          assert.equal(second.redelivery, true);
          assert.deepEqual(
            second.events.map((e) => e.version),
            [2],
          );
          const letters = await store.deadLetters.list(name);
          assert.deepEqual(
            letters.map((l) => [l.event.version, l.status]),
            [
              [1, 'retrying'],
              [2, 'retrying'],
            ],
          );
          await sub.ack(2);
          assert.deepEqual(await store.deadLetters.list(name), []);
          assert.equal((await store.consumers.get(name)).position, 2);
        } finally {
          await sub.close();
        }
      }));

    it('returns a redelivered event that fails again, and its successors, to parked', () =>
      withStore(makeStore, async (store) => {
        const { a } = await twoEntities(store);
        const name = randomConsumer();
        const reader = new Reader(await store.subscribe(name, { batchSize: 1 }), false);
        try {
          await reader.waitForEvents(1);
          await reader.sub.park(1, { reason: 'first' });
          await reader.sub.ack(1);
          await reader.waitFor(() => reader.messages.some((m) => m.kind === 'caught_up'), 'caught_up');
          await reader.sub.ack(6);
          await store.deadLetters.retry(name, { id: reader.events[0]!.id });
          await reader.waitFor(() => redelivered(reader).length === 3, 'three redelivered events');
          // Version 1 succeeds now; version 2 fails again: 1 resolved, 2 and 3 parked behind 2.
          await reader.sub.ack(1);
          await reader.sub.park(3, { reason: 'second', attempts: 2 });
          const letters = await store.deadLetters.list(name);
          assert.deepEqual(
            letters.map((l) => [l.event.version, l.status, l.reason]),
            [
              [2, 'parked', 'second'],
              [3, 'parked', letters[1]!.reason],
            ],
          );
          assert.equal(letters[1]!.behind, letters[0]!.event.id);
          assert.equal(letters[0]!.attempts, 2);
          assert.deepEqual(
            (await store.deadLetters.list(name, { all: true })).map((l) => [
              l.event.stream,
              l.event.version,
              l.status,
            ]),
            [
              [a, 1, 'resolved'],
              [a, 2, 'parked'],
              [a, 3, 'parked'],
            ],
          );
        } finally {
          await reader.stop();
        }
      }));

    it('skips an entity: records who and when, and delivers its later events again', () =>
      withStore(makeStore, async (store) => {
        const { a } = await twoEntities(store);
        const name = randomConsumer();
        const reader = new Reader(await store.subscribe(name, { batchSize: 1 }), false);
        try {
          await reader.waitForEvents(1);
          await reader.sub.park(1, { reason: 'poison' });
          await reader.sub.ack(1);
          await reader.waitFor(() => reader.messages.some((m) => m.kind === 'caught_up'), 'caught_up');
          await reader.sub.ack(6);
          assert.equal(await store.deadLetters.skip(name, { stream: a }, { by: 'ops@example' }), 3);
          assert.deepEqual(await store.deadLetters.list(name), []);
          const all = await store.deadLetters.list(name, { all: true });
          assert.ok(
            all.every((l) => l.status === 'skipped' && l.skippedBy === 'ops@example' && l.skippedAt !== null),
          );
          assert.equal((await store.consumers.get(name)).parked, 0);
          await store.append(a, [{ type: 'step', data: { i: 4 } }]);
          await reader.waitFor(
            () => reader.events.some((e) => e.stream === a && e.version === 4),
            'a-4 delivered',
          );
          assert.ok(!reader.messages.some((m) => m.kind === 'events' && m.redelivery));
        } finally {
          await reader.stop();
        }
      }));

    it('keeps dead letters across owners: a new owner still parks the entity behind them', () =>
      withStore(makeStore, async (store) => {
        const { a } = await twoEntities(store);
        const name = randomConsumer();
        const sub = await store.subscribe(name, { batchSize: 1 });
        await nextEvents(sub[Symbol.asyncIterator]());
        await sub.park(1, { reason: 'x' });
        await sub.close(); // crashed before acking: position 1 is redelivered to the next owner
        const next = new Reader(await store.subscribe(name));
        try {
          await next.waitFor(() => next.messages.some((m) => m.kind === 'caught_up'), 'caught_up');
          assert.deepEqual(next.positions, [2, 4, 6]);
          assert.deepEqual(
            (await store.deadLetters.list(name)).map((l) => [l.event.stream, l.event.version]),
            [
              [a, 1],
              [a, 2],
              [a, 3],
            ],
          );
          assert.equal((await store.consumers.get(name)).position, 6);
        } finally {
          await next.stop();
        }
      }));

    it('refuses bad park, retry and skip input', () =>
      withStore(makeStore, async (store) => {
        await twoEntities(store);
        const name = randomConsumer();
        const sub = await store.subscribe(name, { batchSize: 1 });
        try {
          await nextEvents(sub[Symbol.asyncIterator]());
          assert.equal(
            (await rejectsWith(() => sub.park(2, { reason: 'x' }), 'invalid_input')).details.field,
            'position',
          );
          assert.equal(
            (await rejectsWith(() => sub.park(1, {} as never), 'invalid_input')).details.field,
            'info.reason',
          );
          await rejectsWith(() => sub.park(1, { reason: 'x', attempts: 0 }), 'invalid_input');
          await rejectsWith(() => store.deadLetters.retry(name, {} as never), 'invalid_input');
          await rejectsWith(() => store.deadLetters.skip(name, { stream: 'a', id: 'b' }), 'invalid_input');
          await rejectsWith(() => store.deadLetters.list(randomConsumer()), 'not_found');
          assert.equal(await store.deadLetters.retry(name, { stream: 'nothing-here' }), 0);
        } finally {
          await sub.close();
        }
      }));
  });
}
