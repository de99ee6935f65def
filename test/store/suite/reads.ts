import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventStore, ReadAllOptions, ReadStreamOptions } from '../../../src/core/eventStore.js';
import { randomCategory, randomStream } from '../../support/names.js';
import { collect, events, rejectsWith, sharedStore, withStore, type MakeStore } from './context.js';

async function versions(store: EventStore, stream: string, options?: ReadStreamOptions): Promise<number[]> {
  return (await collect(store.readStream(stream, options))).map((e) => e.version);
}

async function positions(store: EventStore, options?: ReadAllOptions): Promise<number[]> {
  return (await collect(store.readAll(options))).map((e) => e.position);
}

export function readTests(make: MakeStore): void {
  describe('readStream', () => {
    const shared = sharedStore(make);
    it('reads one stream in version order, from a version and up to a limit', () =>
      withStore(make, async (store) => {
        const s = randomStream();
        const other = randomStream();
        await store.append(s, events(3));
        await store.append(other, events(2));
        await store.append(s, events(4));
        assert.deepEqual(await versions(store, s), [1, 2, 3, 4, 5, 6, 7]);
        assert.deepEqual(await versions(store, s, { fromVersion: 3 }), [3, 4, 5, 6, 7]);
        assert.deepEqual(await versions(store, s, { fromVersion: 7 }), [7]);
        assert.deepEqual(await versions(store, s, { fromVersion: 8 }), []);
        assert.deepEqual(await versions(store, s, { fromVersion: 1000 }), []);
        assert.deepEqual(await versions(store, s, { limit: 2 }), [1, 2]);
        assert.deepEqual(await versions(store, s, { fromVersion: 4, limit: 3 }), [4, 5, 6]);
        assert.deepEqual(await versions(store, s, { fromVersion: 6, limit: 10 }), [6, 7]);
        const read = await collect(store.readStream(s));
        assert.ok(read.every((e) => e.stream === s));
        assert.deepEqual(
          read.map((e) => e.position),
          [1, 2, 3, 6, 7, 8, 9],
        );
      }));

    it('an unknown stream reads as empty', () =>
      withStore(make, async (store) => {
        await store.append(randomStream(), events(1));
        assert.deepEqual(await versions(store, randomStream()), []);
      }));

    it('a stream name is matched exactly, not as a prefix', () =>
      withStore(make, async (store) => {
        const s = randomStream();
        await store.append(s, events(1));
        await store.append(`${s}0`, events(2));
        await store.append(s.toUpperCase(), events(3));
        assert.deepEqual(await versions(store, s), [1]);
        assert.equal(await store.streamVersion(s.toUpperCase()), 3);
      }));

    it('answers next() calls made without waiting in order, and is done after return()', () =>
      withStore(make, async (store) => {
        const s = randomStream();
        await store.append(s, events(5));
        const read = store.readStream(s)[Symbol.asyncIterator]();
        const answers = await Promise.all(Array.from({ length: 7 }, () => read.next()));
        assert.deepEqual(
          answers.map((r) => (r.done ? 'done' : r.value.version)),
          [1, 2, 3, 4, 5, 'done', 'done'],
        );
        const stopped = store.readStream(s)[Symbol.asyncIterator]();
        const first = stopped.next();
        const ended = stopped.return?.();
        const after = stopped.next();
        const one = await first;
        assert.equal(one.done ? undefined : one.value.version, 1);
        assert.equal((await ended)?.done, true);
        assert.equal((await after).done, true, 'a read ended by return() yields nothing more');
      }));

    it('checks its options when iterated, not when called', async () => {
      const read = shared().readStream('ok-1', { limit: 0 });
      await rejectsWith(read[Symbol.asyncIterator]().next(), 'invalid_input', 'limit');
    });

    for (const [what, stream, options, field] of [
      ['an empty stream name', '', {}, 'stream'],
      ['fromVersion -1', 'ok-1', { fromVersion: -1 }, 'fromVersion'],
      ['fromVersion 1.5', 'ok-1', { fromVersion: 1.5 }, 'fromVersion'],
      ['limit 0', 'ok-1', { limit: 0 }, 'limit'],
      ['limit -3', 'ok-1', { limit: -3 }, 'limit'],
    ] as const) {
      it(`${what} is invalid_input`, async () => {
        await rejectsWith(
          collect(shared().readStream(stream, options as ReadStreamOptions)),
          'invalid_input',
          field,
        );
      });
    }
  });

  describe('readAll', () => {
    const shared = sharedStore(make);
    it('reads every event in position order, after a position and up to a limit', () =>
      withStore(make, async (store) => {
        await store.append(randomStream(), events(4));
        await store.append(randomStream(), events(3));
        await store.append(randomStream(), events(3));
        assert.deepEqual(await positions(store), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert.deepEqual(await positions(store, { after: 0 }), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert.deepEqual(await positions(store, { after: 6 }), [7, 8, 9, 10]);
        assert.deepEqual(await positions(store, { after: 10 }), []);
        assert.deepEqual(await positions(store, { after: 500 }), []);
        assert.deepEqual(await positions(store, { limit: 3 }), [1, 2, 3]);
        assert.deepEqual(await positions(store, { after: 4, limit: 2 }), [5, 6]);
      }));

    it('yields the same events readStream does', () =>
      withStore(make, async (store) => {
        const a = randomStream();
        const b = randomStream();
        await store.append(a, events(2));
        await store.append(b, [
          { type: 'x', data: { deep: [1, { two: 2 }] }, metadata: { correlationId: 'c' } },
        ]);
        await store.append(a, events(1));
        const all = await collect(store.readAll());
        const byStream = [...(await collect(store.readStream(a))), ...(await collect(store.readStream(b)))];
        assert.deepEqual(
          [...all].sort((x, y) => x.position - y.position),
          byStream.sort((x, y) => x.position - y.position),
        );
      }));

    it('filters by event types, categories and stream prefixes', () =>
      withStore(make, async (store) => {
        const inv = randomCategory('invoice');
        const ord = randomCategory('order');
        const inv1 = `${inv}-1`;
        const inv2 = `${inv}-2`;
        const ord1 = `${ord}-1`;
        const loose = `${inv}_loose`; // no '-': its category is the whole name
        await store.append(inv1, [{ type: 'invoice.issued', data: 1 }]); // 1
        await store.append(ord1, [{ type: 'order.placed', data: 2 }]); // 2
        await store.append(inv2, [{ type: 'invoice.issued', data: 3 }]); // 3
        await store.append(inv1, [{ type: 'invoice.paid', data: 4 }]); // 4
        await store.append(loose, [{ type: 'invoice.paid', data: 5 }]); // 5
        await store.append(ord1, [{ type: 'invoice.paid', data: 6 }]); // 6
        const at = (filter: ReadAllOptions['filter'], extra: ReadAllOptions = {}): Promise<number[]> =>
          positions(store, { ...extra, ...(filter === undefined ? {} : { filter }) });
        assert.deepEqual(await at({ types: ['invoice.issued'] }), [1, 3]);
        assert.deepEqual(await at({ types: ['invoice.issued', 'order.placed'] }), [1, 2, 3]);
        assert.deepEqual(await at({ categories: [inv] }), [1, 3, 4]);
        assert.deepEqual(await at({ categories: [inv, ord] }), [1, 2, 3, 4, 6]);
        assert.deepEqual(await at({ categories: [loose] }), [5]);
        assert.deepEqual(await at({ streamPrefixes: [inv] }), [1, 3, 4, 5]);
        assert.deepEqual(await at({ streamPrefixes: [inv1] }), [1, 4]);
        assert.deepEqual(
          await at({ categories: [ord], streamPrefixes: [inv2] }),
          [2, 3, 6],
          'categories OR prefixes',
        );
        assert.deepEqual(
          await at({ types: ['invoice.paid'], categories: [inv, ord] }),
          [4, 6],
          'types AND streams',
        );
        assert.deepEqual(await at({ types: ['nothing.matches'] }), []);
        assert.deepEqual(await at({}), [1, 2, 3, 4, 5, 6], 'an empty filter matches everything');
        assert.deepEqual(await at({ types: [] }), [1, 2, 3, 4, 5, 6], 'an empty list does not constrain');
        assert.deepEqual(await at({ types: ['invoice.paid'] }, { after: 4 }), [5, 6]);
        assert.deepEqual(await at({ types: ['invoice.paid'] }, { limit: 2 }), [4, 5], 'limit counts matches');
        assert.deepEqual(await at({ types: ['invoice.paid'] }, { after: 4, limit: 1 }), [5]);
      }));

    it('a filter skips long runs of non-matching events', () =>
      withStore(make, async (store) => {
        const wanted = randomCategory('wanted');
        await store.append(`${wanted}-1`, events(1, 'w'));
        for (let i = 0; i < 5; i++) await store.append(randomStream('noise'), events(500));
        await store.append(`${wanted}-2`, events(1, 'w'));
        const found = await collect(store.readAll({ filter: { categories: [wanted] } }));
        assert.deepEqual(
          found.map((e) => e.position),
          [1, 2502],
        );
      }));

    for (const [what, options, field] of [
      ['after -1', { after: -1 }, 'after'],
      ['after 2.5', { after: 2.5 }, 'after'],
      ['limit 0', { limit: 0 }, 'limit'],
      ['an unknown filter field', { filter: { streams: ['x'] } }, 'filter.streams'],
      ['a filter list that is not an array', { filter: { types: 'invoice.paid' } }, 'filter.types'],
      ['an empty string in a filter list', { filter: { categories: [''] } }, 'filter.categories[0]'],
    ] as const) {
      it(`${what} is invalid_input`, async () => {
        await rejectsWith(collect(shared().readAll(options as ReadAllOptions)), 'invalid_input', field);
      });
    }
  });
}
