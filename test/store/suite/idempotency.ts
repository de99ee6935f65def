import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { NewEvent } from '../../../src/core/event.js';
import { randomStream } from '../../support/names.js';
import { assertUnchanged, collect, events, rejectsWith, withStore, type MakeStore } from './context.js';

function batch(n: number): NewEvent[] {
  return Array.from({ length: n }, (_, i) => ({
    id: randomUUID(),
    type: 'order.placed',
    data: { line: i, sku: `sku-${i}` },
    metadata: { commandId: 'cmd-1' },
  }));
}

export function idempotencyTests(make: MakeStore): void {
  describe('idempotent append', () => {
    it('re-appending the same ids and content returns the original result with duplicate: true and writes nothing', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        const b = batch(3);
        const first = await store.append(stream, b);
        await store.append(randomStream(), events(2));
        const again = await store.append(stream, structuredClone(b));
        assert.equal(first.duplicate, false);
        assert.deepEqual(again, { ...first, duplicate: true });
        await assertUnchanged(store, 5, stream, 3);
      }));

    it('a duplicate keeps its original positions after other appends to the same stream', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        const b = batch(2);
        const first = await store.append(stream, b);
        await store.append(stream, events(4));
        const again = await store.append(stream, b);
        assert.deepEqual(again, { ...first, duplicate: true });
        assert.equal(await store.streamVersion(stream), 6);
      }));

    it('compares content as JSON: key order does not matter, omitted metadata equals {}', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        const id = randomUUID();
        const id2 = randomUUID();
        await store.append(stream, [
          { id, type: 't', data: { a: 1, b: { c: 2, d: 3 } }, metadata: { x: 1, y: 2 } },
          { id: id2, type: 't', data: null },
        ]);
        const again = await store.append(stream, [
          { id, type: 't', data: { b: { d: 3, c: 2 }, a: 1 }, metadata: { y: 2, x: 1 } },
          { id: id2, type: 't', data: null, metadata: {} },
        ]);
        assert.equal(again.duplicate, true);
        await assertUnchanged(store, 2, stream, 2);
      }));

    it('matches ids case-insensitively', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        const id = randomUUID();
        await store.append(stream, [{ id, type: 't', data: 1 }]);
        const again = await store.append(stream, [{ id: id.toUpperCase(), type: 't', data: 1 }]);
        assert.equal(again.duplicate, true);
        assert.deepEqual(again.ids, [id]);
      }));

    it('a duplicate wins over a now-stale expected version, so a retried append succeeds', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        const b = batch(1);
        const first = await store.append(stream, b, { expectedVersion: 'no_stream' });
        await store.append(stream, events(1));
        const retry = await store.append(stream, b, { expectedVersion: 'no_stream' });
        assert.deepEqual(retry, { ...first, duplicate: true });
        const retry0 = await store.append(stream, b, { expectedVersion: 0 });
        assert.equal(retry0.duplicate, true);
        assert.equal(await store.streamVersion(stream), 2);
      }));

    it('events without ids are new events every time', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        const e = [{ type: 't', data: { same: true } }];
        const r1 = await store.append(stream, e);
        const r2 = await store.append(stream, e);
        assert.equal(r2.duplicate, false);
        assert.notDeepEqual(r1.ids, r2.ids);
        assert.equal(await store.streamVersion(stream), 2);
      }));

    for (const [what, change] of [
      ['other data', (e: NewEvent): NewEvent => ({ ...e, data: { other: true } })],
      ['another type', (e: NewEvent): NewEvent => ({ ...e, type: 'order.cancelled' })],
      ['other metadata', (e: NewEvent): NewEvent => ({ ...e, metadata: { commandId: 'cmd-2' } })],
      [
        'no metadata where there was some',
        (e: NewEvent): NewEvent => ({ id: e.id!, type: e.type, data: e.data }),
      ],
    ] as const) {
      it(`the same id with ${what} is idempotency_conflict and writes nothing`, () =>
        withStore(make, async (store) => {
          const stream = randomStream();
          const b = batch(2);
          await store.append(stream, b);
          const err = await rejectsWith(store.append(stream, [b[0]!, change(b[1]!)]), 'idempotency_conflict');
          assert.equal(err.details.id, b[1]!.id);
          await assertUnchanged(store, 2, stream, 2);
        }));
    }

    it('the same id in another stream is idempotency_conflict naming the stream that holds it', () =>
      withStore(make, async (store) => {
        const a = randomStream();
        const b = randomStream();
        const e = batch(1);
        await store.append(a, e);
        const err = await rejectsWith(store.append(b, e), 'idempotency_conflict');
        assert.equal(err.details.existingStream, a);
        assert.ok(err.message.includes(a), `message names ${a}: ${err.message}`);
        await assertUnchanged(store, 1, b, 0);
      }));

    it('a batch mixing stored and new ids (partial overlap) is idempotency_conflict and writes nothing', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        const b = batch(2);
        await store.append(stream, b);
        const fresh = batch(1)[0]!;
        await rejectsWith(store.append(stream, [b[0]!, b[1]!, fresh]), 'idempotency_conflict');
        await rejectsWith(store.append(stream, [fresh, b[0]!]), 'idempotency_conflict');
        await assertUnchanged(store, 2, stream, 2);
        assert.deepEqual(await collect(store.readAll({ after: 2 })), []);
      }));

    it('appends made together with a partial overlap, a retry and a stale expected version each get their own result', () =>
      withStore(make, async (store) => {
        // Stores that commit concurrent appends together (group commit) get all of these in one
        // group: the failures must write nothing and leave the others' positions gap-free.
        const stream = randomStream();
        const stored = batch(2);
        const first = await store.append(stream, stored);
        const others = [randomStream(), randomStream(), randomStream()];
        const fresh = batch(1)[0]!;
        const results = await Promise.allSettled([
          store.append(others[0]!, events(3)),
          store.append(stream, [fresh, stored[1]!]), // writes a row, then meets a stored id
          store.append(others[1]!, events(2)),
          store.append(stream, structuredClone(stored)), // a retry: the original result
          store.append(stream, events(1), { expectedVersion: 7 }), // stale: nothing written
          store.append(others[2]!, events(4)),
        ]);
        const [a, overlap, b, retry, stale, c] = results;
        assert.equal(overlap.status, 'rejected');
        assert.equal((overlap.reason as { code?: string }).code, 'idempotency_conflict');
        assert.equal(stale.status, 'rejected');
        assert.equal((stale.reason as { code?: string }).code, 'wrong_expected_version');
        assert.deepEqual(retry, { status: 'fulfilled', value: { ...first, duplicate: true } });
        const ok = [a, b, c].map((r) => {
          assert.equal(r.status, 'fulfilled');
          return r.value;
        });
        assert.deepEqual(
          ok.map((r) => [r.version, r.lastPosition - r.firstPosition + 1]),
          [
            [3, 3],
            [2, 2],
            [4, 4],
          ],
        );
        const all = await collect(store.readAll());
        assert.deepEqual(
          all.map((e) => e.position),
          Array.from({ length: 11 }, (_, i) => i + 1),
        );
        assert.equal(await store.streamVersion(stream), 2);
        assert.ok(!all.some((e) => e.id === fresh.id), 'the overlapping append wrote nothing');
      }));

    it('the same ids in another order is idempotency_conflict', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        const b = batch(2);
        await store.append(stream, b);
        await rejectsWith(store.append(stream, [b[1]!, b[0]!]), 'idempotency_conflict');
        await assertUnchanged(store, 2, stream, 2);
      }));

    it('the same id twice in one call is invalid_input naming the second one', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        const id = randomUUID();
        await rejectsWith(
          store.append(stream, [
            { id, type: 't', data: 1 },
            { type: 't', data: 2 },
            { id: id.toUpperCase(), type: 't', data: 1 },
          ]),
          'invalid_input',
          'events[2].id',
        );
        await assertUnchanged(store, 0, stream, 0);
      }));
  });
}
