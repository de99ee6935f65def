// PostgreSQL's `firstStreamMatch`: the first position whose stream is in one of some categories or
// starts with one of some prefixes, by comparing each stream's category and first characters with
// the lists of them (hash tables, one per length of prefix), exactly as matching each stream would
// say, whatever characters the names hold and however many share a length; and the shared tail's
// use of it: idle subscriptions whose streams get no events follow a busy log on its answers, and
// get their events; where none of their streams exists, the streams' index answers without it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { matchesStream } from '../../src/core/filter.js';
import { until } from '../support/until.js';
import { Reader } from '../subscriptions/suite/context.js';
import { pgTestContext } from './pgFixtures.js';

const ctx = await pgTestContext();

/** Parts that are special in patterns, or sort on either side of '-', or are not ASCII (one code point, two UTF-16 units). */
const part = fc.constantFrom(
  'a',
  'ab',
  'a.',
  '.*',
  '(',
  '[x]',
  '\\',
  '^$',
  'a|b',
  '?+',
  '{2}',
  'é',
  '\u{1F600}',
  'B',
  '0',
);
const nameArb = fc
  .array(part, { minLength: 1, maxLength: 3 })
  .chain((parts) => fc.constantFrom(parts.join('-'), parts.join('')));

type Store = Awaited<ReturnType<typeof ctx.openStore>>;

/**
 * Two idle subscriptions (category `quiet`, prefix `nobody-`) while another store object appends
 * 12,000 positions to `other-1`, past the 5,000 a stored cursor may trail its read position: once
 * both cursors passed 5,000, `check` gets the answers `firstStreamMatch` gave meanwhile; then an event
 * of `quiet-1` goes to the first subscription alone. `quietFirst`: `quiet-1` has an event (so one of
 * their streams exists) before they start.
 */
async function idleBesideBusyLog(
  quietFirst: boolean,
  check: (answers: { first: number | null }[], store: Store) => void | Promise<void>,
): Promise<void> {
  const store = await ctx.openStore();
  const other = await ctx.openStore({ schema: store.schema });
  const answers: { first: number | null }[] = [];
  const firstStreamMatch = store.firstStreamMatch.bind(store);
  store.firstStreamMatch = async (afterPosition, prefixes, categories) => {
    const answer = await firstStreamMatch(afterPosition, prefixes, categories);
    answers.push(answer);
    return answer;
  };
  const earlier = quietFirst ? 1 : 0;
  if (quietFirst) await other.append('quiet-1', [{ type: 't', data: null }]);
  const readers: Reader[] = [];
  try {
    for (const filter of [{ categories: ['quiet'] }, { streamPrefixes: ['nobody-'] }]) {
      const reader = new Reader(await store.subscribe(`idle_${readers.length}_v1`, { filter }));
      readers.push(reader);
      await reader.waitFor(() => reader.messages.some((m) => m.kind === 'caught_up'), 'caught_up');
    }
    await readers[0]!.waitForEvents(earlier);
    for (let i = 0; i < 24; i++) {
      await other.append(
        'other-1',
        Array.from({ length: 500 }, (_, j) => ({ type: 't', data: { j } })),
      );
    }
    for (const name of ['idle_0_v1', 'idle_1_v1']) {
      await until(async () => (await store.consumers.get(name)).position >= 5_000, {
        message: `the cursor of ${name} past 5,000`,
      });
    }
    await check(answers, store);
    const position = (await other.append('quiet-1', [{ type: 't', data: null }])).lastPosition;
    await readers[0]!.waitForEvents(earlier + 1);
    assert.equal(readers[0]!.positions.at(-1), position);
    assert.deepEqual(readers[1]!.events, []);
  } finally {
    for (const r of readers) await r.stop();
    await other.close();
    await store.close();
  }
}

describe('PostgreSQL firstStreamMatch', { skip: ctx.skip }, () => {
  it('finds the first position whose stream a category or prefix wants, as matching each stream would', async () => {
    const store = await ctx.openSharedStore();
    try {
      const streams: string[] = [];
      await fc.assert(
        fc.asyncProperty(
          fc.array(nameArb, { minLength: 1, maxLength: 4 }),
          fc.array(nameArb, { maxLength: 12 }),
          fc.array(nameArb, { maxLength: 12 }),
          fc.nat(),
          async (appended, prefixes, categories, from) => {
            for (const stream of appended) {
              await store.append(stream, [{ type: 't', data: null }]);
              streams.push(stream);
            }
            const afterPosition = from % (streams.length + 1);
            const got = await store.firstStreamMatch(afterPosition, prefixes, categories);
            assert.equal(got.head, streams.length);
            const filter = { streamPrefixes: prefixes, categories };
            const index = streams.findIndex(
              (s, i) =>
                i + 1 > afterPosition &&
                (prefixes.length > 0 || categories.length > 0) &&
                matchesStream(filter, s),
            );
            assert.equal(
              got.first,
              index < 0 ? null : index + 1,
              `${JSON.stringify(filter)} after ${afterPosition} over ${JSON.stringify(streams)}`,
            );
          },
        ),
        { numRuns: 60 },
      );
    } finally {
      await store.close();
    }
  });

  it('matches among many prefixes of one length and many categories, as matching each stream would', async () => {
    const store = await ctx.openStore();
    try {
      // 40 prefixes of four characters, one of them of five UTF-16 units, and 20 categories: lists
      // long enough to be looked up in hash tables.
      const prefixes = [
        ...Array.from({ length: 39 }, (_, i) => `p${String(i).padStart(2, '0')}-`),
        '\u{1F600}é-x',
      ];
      const categories = Array.from({ length: 20 }, (_, i) => `cat${i}`);
      const near = [
        'p4-1',
        'p040-1',
        'P01-1',
        'p01',
        '\u{1F600}é-y',
        '\u{1F600}e-x1',
        'cat20-1',
        'cat1x',
        'cat-1',
        'xcat1',
      ];
      const filter = { streamPrefixes: prefixes, categories };
      for (const stream of near) {
        assert.ok(!matchesStream(filter, stream), stream);
        await store.append(stream, [{ type: 't', data: null }]);
      }
      assert.deepEqual(await store.firstStreamMatch(0, prefixes, categories), {
        head: near.length,
        first: null,
      });
      let head = near.length;
      for (const stream of ['\u{1F600}é-xy', 'p38-a', 'cat7', 'cat19-2', 'p00-x']) {
        assert.ok(matchesStream(filter, stream), stream);
        await store.append('other-1', [{ type: 't', data: null }]);
        const { lastPosition } = await store.append(stream, [{ type: 't', data: null }]);
        assert.deepEqual(await store.firstStreamMatch(head, prefixes, categories), {
          head: lastPosition,
          first: lastPosition,
        });
        assert.deepEqual(await store.firstStreamMatch(lastPosition - 1, prefixes, []), {
          head: lastPosition,
          first: stream.startsWith('cat') ? null : lastPosition,
        });
        head = lastPosition;
      }
    } finally {
      await store.close();
    }
  });

  it('lets idle subscriptions whose streams get no events follow a busy log on its answers', () =>
    idleBesideBusyLog(true, async (answers) => {
      // Their own reads may take the cursors past 5,000 before they come to rest: the next polling
      // tick after that asks firstStreamMatch.
      await until(() => answers.some((a) => a.first === null), {
        message: 'a tick answered by firstStreamMatch',
      });
    }));

  it('answers for idle subscriptions whose streams do not exist from the streams index, without a scan', () =>
    idleBesideBusyLog(false, async (answers, store) => {
      // Where the stream column does not sort by code point the index cannot tell, and the scan answers.
      const probing = !(await store.streamsMayMatch({ streamPrefixes: ['nobody-'] })).may;
      if (probing) assert.equal(answers.length, 0, 'the events were scanned for streams that do not exist');
      else assert.ok(answers.length > 0, 'no tick was answered by firstStreamMatch');
    }));
});
