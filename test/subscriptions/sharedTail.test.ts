// The shared tail answers a look exactly as a scan of the log would: the first position after the
// asker's that matches its filter, up to where it looked, whatever blocks it skipped by their
// summaries and however the held keys were trimmed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { matchesFilter, type EventFilter } from '../../src/core/filter.js';
import { streamHash } from '../../src/core/streamHash.js';
import { SharedTail, TAIL_BLOCK } from '../../src/subscriptions/sharedTail.js';
import { scanEnd, type KeyPage } from '../../src/subscriptions/subscriptionSource.js';
import { until } from '../support/until.js';

/** One event's key: position, stream, type and stream hash. */
type Key = [position: number, stream: string, type: string, hash: number];

/** The page of `keys` (a log from position 1) a read after `after` up to `through` answers. */
function pageOf(keys: readonly Key[], after: number, through: number, head: number): KeyPage {
  const run = keys.slice(after, through);
  return {
    positions: run.map((k) => k[0]),
    streams: run.map((k) => k[1]),
    types: run.map((k) => k[2]),
    hashes: run.map((k) => k[3]),
    through,
    head,
  };
}

const STREAMS = ['a', 'a-1', 'a-2', 'ab-1', 'ab-10', 'b-1', 'b-2', 'bc', 'c-1', 'é-1'];
const TYPES = ['t1', 't2', 't3'];

const filterArb: fc.Arbitrary<EventFilter> = fc.record(
  {
    types: fc.subarray(TYPES),
    categories: fc.subarray(['a', 'ab', 'b', 'bc', 'c', 'é', 'z']),
    streamPrefixes: fc.subarray(['a', 'a-', 'a-1', 'ab', 'ab-1', 'b', 'bc', 'c-1', 'é', 'z', '']),
    partition: fc
      .integer({ min: 1, max: 4 })
      .chain((count) =>
        fc.record({ count: fc.constant(count), index: fc.integer({ min: 0, max: count - 1 }) }),
      ),
  },
  { requiredKeys: [] },
);

/**
 * A log of keys, most of them of a stream and type that few filters match (`x-1`, `t0`), so that
 * looks pass over whole blocks, some of which hold a rarer one.
 */
const logArb = fc.array(
  fc.record({
    stream: fc.oneof(
      { weight: 40, arbitrary: fc.constant('x-1') },
      { weight: 1, arbitrary: fc.constantFrom(...STREAMS) },
    ),
    type: fc.oneof(
      { weight: 40, arbitrary: fc.constant('t0') },
      { weight: 1, arbitrary: fc.constantFrom(...TYPES) },
    ),
  }),
  { minLength: 0, maxLength: 16 * TAIL_BLOCK, size: 'max' },
);

/** Each step appends some of the log's next events, then looks from a position near the head. */
const stepsArb = fc.array(
  fc.record({
    append: fc.integer({ min: 0, max: 3 * TAIL_BLOCK }),
    back: fc.oneof(fc.integer({ min: 0, max: TAIL_BLOCK }), fc.integer({ min: 0, max: 6 * TAIL_BLOCK })),
    maxScan: fc.oneof(fc.integer({ min: 1, max: 5 * TAIL_BLOCK }), fc.constant(10 * TAIL_BLOCK)),
    filter: filterArb,
  }),
  { minLength: 1, maxLength: 24, size: 'max' },
);

interface Step {
  append: number;
  back: number;
  maxScan: number;
  filter: EventFilter;
}

/** Runs `steps` against a tail of `log` holding `tailBlocks` blocks or more, checking every look against a scan. */
async function checkLooks(
  log: { stream: string; type: string }[],
  steps: Step[],
  tailBlocks: number,
): Promise<void> {
  const keys: Key[] = log.map((e, i) => [i + 1, e.stream, e.type, streamHash(e.stream)]);
  let head = 0;
  const tail = new SharedTail(
    (after, maxScan) => {
      const through = scanEnd(after, head, maxScan);
      return Promise.resolve(pageOf(keys, after, through, head));
    },
    0,
    tailBlocks * TAIL_BLOCK,
  );
  for (const step of steps) {
    head = Math.min(keys.length, head + step.append);
    // As the service reports this process's commits.
    tail.appended(head);
    const after = Math.max(0, head - step.back);
    const look = await tail.look(after, step.filter, step.maxScan);
    if (look === null) continue;
    assert.ok(look.through >= after && look.through <= Math.min(head, after + step.maxScan));
    assert.equal(look.head, head);
    const expected = keys
      .slice(after, look.through)
      .find(([, stream, type]) => matchesFilter(step.filter, { stream, type }));
    assert.equal(look.first, expected?.[0] ?? null);
  }
}

describe('SharedTail', () => {
  it('finds the first matching position a scan would, with blocks skipped', async () => {
    await fc.assert(fc.asyncProperty(logArb, stepsArb, fc.integer({ min: 1, max: 3 }), checkLooks), {
      numRuns: 300,
    });
  });

  it('keeps each block summary with its keys when the held keys are trimmed', async () => {
    // Every event in `x-1` but one in `mine-1`, at position 775 (the fourth block).
    const keys: Key[] = Array.from({ length: 1_040 }, (_, i) => {
      const stream = i + 1 === 775 ? 'mine-1' : 'x-1';
      return [i + 1, stream, 't', streamHash(stream)];
    });
    let head = 0;
    const tail = new SharedTail(
      (after, maxScan) => {
        const through = scanEnd(after, head, maxScan);
        return Promise.resolve(pageOf(keys, after, through, head));
      },
      0,
      2 * TAIL_BLOCK,
    );
    const none: EventFilter = { streamPrefixes: ['none-'] };
    const at = async (h: number, after: number, filter: EventFilter) => {
      head = h;
      tail.appended(h);
      return tail.look(after, filter, keys.length);
    };
    // Looks that summarise the first three blocks (positions 1 to 768).
    assert.equal((await at(512, 0, none))?.first, null);
    assert.equal((await at(1_000, 512, none))?.first, null);
    // Reading on to 1,040 keys trims the first 512 (two blocks; not 528, the excess over 512 kept).
    assert.deepEqual(await at(1_040, 528, { streamPrefixes: ['mine-'] }), {
      through: 1_040,
      head: 1_040,
      first: 775,
    });
  });

  it('skips whole blocks that hold nothing for the filter', async () => {
    // 20 blocks of `other-*` events, then one `mine-1` event.
    const keys: Key[] = Array.from({ length: 20 * TAIL_BLOCK + 1 }, (_, i) => {
      const stream = i === 20 * TAIL_BLOCK ? 'mine-1' : `other-${i % 7}`;
      return [i + 1, stream, 't', streamHash(stream)];
    });
    const tail = new SharedTail((after, maxScan) => {
      const through = scanEnd(after, keys.length, maxScan);
      return Promise.resolve(pageOf(keys, after, through, keys.length));
    }, 1_000);
    // Counts how often the filter is consulted: once per key looked at one by one, once per block.
    let reads = 0;
    const filter: EventFilter = {
      get streamPrefixes() {
        reads++;
        return ['mine-'];
      },
    };
    const look = await tail.look(0, filter, keys.length);
    assert.deepEqual(look, { through: keys.length, head: keys.length, first: keys.length });
    assert.ok(reads <= 21 + 1, `the filter was consulted ${reads} times for ${keys.length} keys`);
    const none = await tail.look(0, { categories: ['nobody'], types: ['t'] }, keys.length);
    assert.deepEqual(none, { through: keys.length, head: keys.length, first: null });
  });
});

describe('SharedTail.rest', () => {
  /** A log of `x-1` keys the test appends to, with the reads of its keys counted. */
  function growingLog() {
    const keys: Key[] = [];
    const log = {
      reads: 0,
      head: 0,
      append(stream: string, n = 1): void {
        for (let i = 0; i < n; i++) keys.push([keys.length + 1, stream, 't', streamHash(stream)]);
        log.head = keys.length;
      },
      scan: (after: number, maxScan: number) => {
        log.reads++;
        const through = scanEnd(after, log.head, maxScan);
        return Promise.resolve(pageOf(keys, after, through, log.head));
      },
    };
    return log;
  }

  it('wakes a resting subscription at the first tick whose keys hold an event for it, telling it how far nothing matched', async () => {
    const log = growingLog();
    log.append('x-1', 10);
    const tail = new SharedTail(log.scan, 1);
    const throughs: number[] = [];
    const rest = tail.rest(10, { streamPrefixes: ['mine-'] }, 10_000, 5, (t) => throughs.push(t));
    let woken = false;
    void rest.done.then(() => (woken = true));
    log.append('x-1', 7);
    await until(() => throughs.includes(17), { message: 'told through 17' });
    assert.equal(woken, false);
    log.append('x-1', 3);
    log.append('mine-1');
    await rest.done;
    // Told each stretch of left-out positions, never past them.
    assert.ok(
      throughs.every((t) => t <= 20),
      `throughs ${throughs.join(',')}`,
    );
    assert.deepEqual(
      throughs.filter((t, i) => i > 0 && t <= throughs[i - 1]!),
      [],
    );
  });

  it('looks for every resting subscription on one read of the keys per tick', async () => {
    const log = growingLog();
    log.append('x-1', 5);
    const tail = new SharedTail(log.scan, 1_000);
    const rests = Array.from({ length: 20 }, (_, i) =>
      tail.rest(5, { streamPrefixes: [`mine-${i}-`] }, 10_000, 5, () => undefined),
    );
    log.append('mine-7-a');
    await rests[7]!.done;
    const reads = log.reads;
    assert.ok(reads <= 2, `${reads} reads of the keys for 20 resting subscriptions`);
    for (const r of rests) r.cancel();
  });

  it('wakes a subscription the tail cannot answer for, and ends a cancelled rest at once', async () => {
    const log = growingLog();
    log.append('x-1', 3 * TAIL_BLOCK);
    // The keys it holds start at the first look's position: a rest from before it is not answered.
    const tail = new SharedTail(log.scan, 1, TAIL_BLOCK);
    assert.equal((await tail.look(2 * TAIL_BLOCK, { types: ['none'] }, 10_000))?.first, null);
    await tail.rest(1, { types: ['none'] }, 10_000, 5, () => undefined).done;
    const cancelled = tail.rest(6 * TAIL_BLOCK, { types: ['none'] }, 10_000, 60_000, () => undefined);
    cancelled.cancel();
    await cancelled.done;
  });

  it('wakes resting subscriptions when the read of the keys fails', async () => {
    let fail = false;
    const tail = new SharedTail(
      (after) =>
        fail ? Promise.reject(new Error('store closed')) : Promise.resolve(pageOf([], after, after, after)),
      1,
    );
    const rest = tail.rest(0, { types: ['none'] }, 10_000, 5, () => undefined);
    fail = true;
    await rest.done;
  });
});
