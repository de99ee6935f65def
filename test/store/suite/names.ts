import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { RecordedEvent } from '../../../src/core/event.js';
import { matchesFilter, type EventFilter } from '../../../src/core/filter.js';
import { textProblem } from '../../../src/core/validation.js';
import { bySpeed } from '../../support/fast.js';
import { randomCategory } from '../../support/names.js';
import { collect, rejectsWith, sharedStore, type MakeStore } from './context.js';

/** [what, filter, field named by the error] */
const badFilters: [string, EventFilter, string][] = [
  ['257 types', { types: Array.from({ length: 257 }, (_, i) => `t${i}`) }, 'filter.types'],
  ['257 categories', { categories: Array.from({ length: 257 }, (_, i) => `c${i}`) }, 'filter.categories'],
  [
    '257 stream prefixes',
    { streamPrefixes: Array.from({ length: 257 }, (_, i) => `p${i}`) },
    'filter.streamPrefixes',
  ],
  ['a type of 257 characters', { types: ['t'.repeat(257)] }, 'filter.types[0]'],
  ['a stream prefix of 201 characters', { streamPrefixes: ['p'.repeat(201)] }, 'filter.streamPrefixes[0]'],
  ['a type with a NUL', { types: ['ok', 'a\u0000b'] }, 'filter.types[1]'],
  ['a category with a BEL', { categories: ['a\u0007'] }, 'filter.categories[0]'],
  ['a stream prefix with a newline', { streamPrefixes: ['x\n'] }, 'filter.streamPrefixes[0]'],
  [
    'a stream prefix ending in a lone high surrogate',
    { streamPrefixes: ['x\ud83d'] },
    'filter.streamPrefixes[0]',
  ],
  ['a type with a lone low surrogate', { types: ['\ude00'] }, 'filter.types[0]'],
];

/**
 * Characters names are built from: ASCII, the `-` that ends a category, Latin and CJK characters of
 * the Basic Multilingual Plane, and characters outside it (two UTF-16 units each), plus any code
 * point fast-check picks (names it makes invalid are dropped).
 */
const nameUnit = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('a', 'b', '-', '.', 'é', '中', '💥', '𝔘', '🇫') },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
);
const namePart = fc.string({ unit: nameUnit, minLength: 1, maxLength: 5 });

/** The first `n` code points of `s` (never splits a surrogate pair). */
const codePointPrefix = (s: string, n: number): string => Array.from(s).slice(0, n).join('');

/** Filters over names: their bounds, and the same matches on every store for any Unicode name. */
export function nameTests(makeStore: MakeStore): void {
  describe('names in filters', () => {
    const store = sharedStore(makeStore);

    it('refuses filter lists over 256 entries, entries over the name limits, control characters and lone surrogates', async () => {
      for (const [what, filter, field] of badFilters) {
        await assert.doesNotReject(
          rejectsWith(collect(store().readAll({ filter })), 'invalid_input', field),
          what,
        );
      }
      const most = Array.from({ length: 256 }, (_, i) => `t${i}`);
      assert.deepEqual(await collect(store().readAll({ filter: { types: most } })), [], '256 types are fine');
    });

    it('matches categories, stream prefixes and types of random Unicode names as `matchesFilter` does', async () => {
      const seed = Number(process.env.IDEM_FC_SEED ?? 1812);
      await fc.assert(
        fc.asyncProperty(
          fc.uniqueArray(namePart, { minLength: 1, maxLength: 6 }),
          fc.array(fc.tuple(fc.nat(6), fc.nat(5)), { maxLength: 4 }),
          fc.array(namePart, { maxLength: 2 }),
          async (parts, picks, extra) => {
            // A fresh category start per run: only this run's streams can match its filters.
            const tag = randomCategory('u');
            const names = parts.map((p) => `${tag}${p}`).filter((n) => valid(n));
            if (names.length === 0) return;
            const head = await store().headPosition();
            for (const [i, n] of names.entries()) {
              await store().append(n, [{ type: names[(i + 1) % names.length]!.slice(tag.length), data: i }]);
            }
            const written = await collect(store().readAll({ after: head }));
            assert.deepEqual(
              written.map((e) => e.stream),
              names,
              'names read back as written',
            );
            const chosen = picks.map(([i, k]) => ({ name: names[i % names.length]!, k }));
            const prefixes = chosen.map(({ name, k }) => codePointPrefix(name, tag.length + k));
            const categories = chosen.map(({ name }) => name.split('-')[0]!);
            const others = extra.map((p) => `${tag}${p}`).filter((n) => valid(n));
            const types = written.slice(0, 2).map((e) => e.type);
            const filters: EventFilter[] = [
              { streamPrefixes: [...prefixes, ...others] },
              { categories: [...categories, ...others] },
              { categories: others, streamPrefixes: prefixes },
              { types: [...types, ...others.map((o) => o.slice(tag.length))] },
            ];
            for (const filter of filters) {
              const got = await collect(store().readAll({ after: head, filter }));
              assert.deepEqual(
                ids(got),
                ids(written.filter((e) => matchesFilter(filter, e))),
                `filter ${JSON.stringify(filter)} over ${JSON.stringify(names)}`,
              );
            }
          },
        ),
        { numRuns: bySpeed(25, 5), seed },
      );
    });
  });
}

function valid(name: string): boolean {
  return name.length <= 200 && name.trim() === name && textProblem(name) === null;
}

function ids(events: RecordedEvent[]): string[] {
  return events.map((e) => e.id);
}
