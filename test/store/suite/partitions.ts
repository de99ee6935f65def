import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { streamHash, streamPartition } from '../../../src/core/streamHash.js';
import { randomCategory } from '../../support/names.js';
import { collect, events, rejectsWith, withStore, type MakeStore } from './context.js';

/** The documented vectors of the partition hash (docs/consumer-groups.md). */
export const STREAM_HASH_VECTORS: [string, number][] = [
  ['', 0x811c9dc5],
  ['a', 0xe40c292c],
  ['foobar', 0xbf9cf968],
  ['invoice-1', 0xf3093e02],
  ['café-1', 0x07db8967],
  ['発注-7', 0x7bd6e72e],
  ['cart-😀', 0x38ac6997],
];

export function partitionTests(make: MakeStore): void {
  describe('partition filter', () => {
    it('the hash is 32-bit FNV-1a of the UTF-8 name (documented vectors)', () => {
      for (const [s, h] of STREAM_HASH_VECTORS) assert.equal(streamHash(s), h, JSON.stringify(s));
    });

    it('each partition reads exactly the events of its streams, in position order, once in total', () =>
      withStore(make, async (store) => {
        const c = randomCategory();
        const streams = Array.from({ length: 40 }, (_, i) => `${c}-${i}`);
        for (let round = 0; round < 3; round++)
          for (const s of streams) await store.append(s, events(round === 1 ? 2 : 1));
        const all = await collect(store.readAll({ filter: { categories: [c] } }));
        const count = 7;
        const seen: number[] = [];
        for (let index = 0; index < count; index++) {
          const part = await collect(
            store.readAll({ filter: { categories: [c], partition: { count, index } } }),
          );
          for (const e of part) assert.equal(streamPartition(e.stream, count), index, e.stream);
          const positions = part.map((e) => e.position);
          assert.deepEqual(
            positions,
            [...positions].sort((a, b) => a - b),
          );
          seen.push(...positions);
          // Resuming after a position within the partition reads the rest of it.
          if (part.length > 2) {
            const rest = await collect(
              store.readAll({
                after: part[1]!.position,
                filter: { categories: [c], partition: { count, index } },
              }),
            );
            assert.deepEqual(
              rest.map((e) => e.position),
              positions.slice(2),
            );
          }
        }
        assert.deepEqual(
          seen.sort((a, b) => a - b),
          all.map((e) => e.position),
        );
        // One partition of one is everything.
        const one = await collect(
          store.readAll({ filter: { categories: [c], partition: { count: 1, index: 0 } } }),
        );
        assert.equal(one.length, all.length);
      }));

    it('a partition outside the rules is refused naming the field', () =>
      withStore(make, async (store) => {
        await rejectsWith(
          collect(store.readAll({ filter: { partition: { count: 0, index: 0 } } })),
          'invalid_input',
          'filter.partition.count',
        );
        await rejectsWith(
          collect(store.readAll({ filter: { partition: { count: 257, index: 0 } } })),
          'invalid_input',
          'filter.partition.count',
        );
        await rejectsWith(
          collect(store.readAll({ filter: { partition: { count: 4, index: 4 } } })),
          'invalid_input',
          'filter.partition.index',
        );
      }));
  });
}
