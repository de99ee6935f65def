// Bounded reads: one read of a subscription looks at a bounded number of positions, and an idle
// subscription whose filter matches nothing does not read the log again from its cursor.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventStore } from '../../src/core/eventStore.js';
import type { EventFilter } from '../../src/core/filter.js';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { MemorySubscriptionState } from '../../src/memory/subscriptionState.js';
import { EXACT_LAG_LIMIT } from '../../src/subscriptions/lag.js';
import { MAX_SCAN } from '../../src/subscriptions/durableSubscription.js';
import type { ScannedPage, SubscriptionSource } from '../../src/subscriptions/subscriptionSource.js';
import type { RecordedEvent } from '../../src/core/event.js';
import { streamHash } from '../../src/core/streamHash.js';
import { SubscriptionService } from '../../src/subscriptions/subscriptionService.js';
import { pgTestContext } from '../postgres/pgFixtures.js';
import { onEveryStore } from '../support/everyStore.js';
import { until } from '../support/until.js';
import { Reader } from './suite/context.js';

type Scanner = EventStore & Required<Pick<SubscriptionSource, 'scanPage'>>;

const pg = await pgTestContext();

/** 40 events of stream `other-1`, then 10 of `mine-1` (positions 41 to 50). */
async function fill(store: EventStore): Promise<void> {
  for (let i = 0; i < 4; i++) {
    await store.append(
      'other-1',
      Array.from({ length: 10 }, () => ({ type: 't', data: null })),
    );
  }
  await store.append(
    'mine-1',
    Array.from({ length: 10 }, () => ({ type: 't', data: null })),
  );
}

async function scanContract(store: Scanner): Promise<void> {
  await fill(store);
  const mine: EventFilter = { categories: ['mine'] };
  const positions = (p: ScannedPage) => p.events.map((e) => e.position);
  // Nothing matches among the 20 positions it may look at: it says how far it looked.
  let page = await store.scanPage(0, mine, 5, 20);
  assert.deepEqual([positions(page), page.through, page.head], [[], 20, 50]);
  // A full page was read up to its last event only.
  page = await store.scanPage(20, mine, 5, 100);
  assert.deepEqual([positions(page), page.through, page.head], [[41, 42, 43, 44, 45], 45, 50]);
  // An unfilled page looked up to the head.
  page = await store.scanPage(45, mine, 10, 100);
  assert.deepEqual([positions(page), page.through, page.head], [[46, 47, 48, 49, 50], 50, 50]);
  page = await store.scanPage(50, mine, 10, 100);
  assert.deepEqual([positions(page), page.through, page.head], [[], 50, 50]);
}

onEveryStore(pg, 'scanPage: one read looks at no more than maxScan positions', scanContract);

type KeyScanner = EventStore & Required<Pick<SubscriptionSource, 'scanKeys'>>;

/** `scanKeys` answers each event's position, stream, type and stream hash, at most `maxScan` positions. */
async function keysContract(store: KeyScanner): Promise<void> {
  const streams = ['plain-1', 'quote"d-2', 'back\\slash-3', 'ünï-cödé-4', 'space and,comma-5'];
  for (const [i, stream] of streams.entries()) {
    await store.append(stream, [
      { type: `type-${i}`, data: null },
      { type: 't"x', data: null },
    ]);
  }
  const all: RecordedEvent[] = [];
  for await (const e of store.readAll()) all.push(e);
  const expected = (from: number, to: number, through: number) => {
    const run = all.slice(from, to);
    return {
      positions: run.map((e) => e.position),
      streams: run.map((e) => e.stream),
      types: run.map((e) => e.type),
      hashes: run.map((e) => streamHash(e.stream)),
      through,
      head: 10,
    };
  };
  assert.deepEqual(await store.scanKeys(0, 100), expected(0, 10, 10));
  assert.deepEqual(await store.scanKeys(3, 4), expected(3, 7, 7));
  assert.deepEqual(await store.scanKeys(10, 5), expected(10, 10, 10));
}

onEveryStore(pg, 'scanKeys: the keys of the positions after one', keysContract);

interface Read {
  after: number;
  through: number;
  maxScan: number;
}

/**
 * A memory store behind a source that records the engine's reads of pages and, with `tail`, its reads
 * of the keys of the log's tail (`scanKeys`, which the idle subscriptions of a service share).
 */
function recordingSource(tail: boolean) {
  const store = createMemoryStore();
  const pages: Read[] = [];
  const keys: Read[] = [];
  const source: SubscriptionSource = {
    readAll: (o) => store.readAll(o),
    headPosition: () => store.headPosition(),
    onAppend: (listener) => store.onAppend(listener),
    async scanPage(after, filter, limit, maxScan) {
      const page = await store.scanPage(after, filter, limit, maxScan);
      pages.push({ after, through: page.through, maxScan });
      return page;
    },
    ...(tail
      ? {
          async scanKeys(after: number, maxScan: number) {
            const page = await store.scanKeys(after, maxScan);
            keys.push({ after, through: page.through, maxScan });
            return page;
          },
        }
      : {}),
  };
  return { store, pages, keys, source };
}

/** A memory store behind a source that records each of the engine's reads (no tail), and its service. */
function recordingService(pollIntervalMs = 5) {
  const { store, pages: reads, source } = recordingSource(false);
  const service = new SubscriptionService(source, new MemorySubscriptionState(), { pollIntervalMs });
  const close = async (): Promise<void> => {
    await service.close();
    await store.close();
  };
  return { store, reads, service, close };
}

describe('an idle subscription whose filter matches nothing', () => {
  it('reads each position once, at most MAX_SCAN per read, and then only what arrives', async () => {
    const { store, reads, service, close } = recordingService();
    try {
      const total = 2 * MAX_SCAN + 500;
      for (let i = 0; i < total; i += 500) {
        await store.append(
          `other-${i}`,
          Array.from({ length: 500 }, () => ({ type: 't', data: null })),
        );
      }
      const reader = new Reader(await service.subscribe('narrow_v1', { filter: { categories: ['zz'] } }));
      try {
        await reader.waitFor(() => reader.messages.some((m) => m.kind === 'caught_up'), 'caught_up');
        const atCaughtUp = reads.length;
        // Several polls more.
        await until(() => reads.length >= atCaughtUp + 5, { message: 'five more polls' });
        assert.ok(reads.every((r) => r.maxScan <= MAX_SCAN && r.through - r.after <= MAX_SCAN));
        const looked = reads.reduce((n, r) => n + (r.through - r.after), 0);
        assert.equal(looked, total, 'each position is looked at once');
        assert.ok(
          reads.slice(atCaughtUp).every((r) => r.after === total && r.through === total),
          'the polls after catching up start at the head',
        );
        assert.deepEqual(reader.events, []);
      } finally {
        await reader.stop();
      }
    } finally {
      await close();
    }
  });
});

/** Ten subscriptions named `<name>_<i>_v1` whose filters (`zz<i>-` streams) match no event of the log, each caught up. */
async function caughtUpNarrowReaders(
  service: SubscriptionService,
  name: string,
  from?: 'end',
): Promise<Reader[]> {
  const readers: Reader[] = [];
  for (let i = 0; i < 10; i++) {
    const filter = { streamPrefixes: [`zz${i}-`] };
    readers.push(
      new Reader(await service.subscribe(`${name}_${i}_v1`, from ? { filter, from } : { filter })),
    );
  }
  for (const r of readers) {
    await r.waitFor(() => r.messages.some((m) => m.kind === 'caught_up'), 'caught_up');
  }
  return readers;
}

describe('idle subscriptions of one service', () => {
  it('share the reads of the log tail: after catching up, events no filter matches are looked at once for all', async () => {
    const { store, pages, keys, source } = recordingSource(true);
    const service = new SubscriptionService(source, new MemorySubscriptionState(), { pollIntervalMs: 5 });
    const readers: Reader[] = [];
    try {
      await store.append('other-0', [{ type: 't', data: null }]);
      readers.push(...(await caughtUpNarrowReaders(service, 'narrow')));
      const pagesAtCaughtUp = pages.length;
      for (let i = 1; i <= 200; i++) await store.append(`other-${i}`, [{ type: 't', data: null }]);
      await until(() => keys.some((k) => k.through === 201), { message: 'the tail read through 201' });
      assert.equal(pages.length, pagesAtCaughtUp, 'no subscription read pages of events for itself');
      const looked = keys.reduce((n, k) => n + (k.through - k.after), 0);
      assert.ok(looked <= 201, `the tail read each position at most once (looked at ${looked})`);
      assert.ok(readers.every((r) => r.events.length === 0));
      // A matching event is then delivered from the first position that matches.
      await store.append('zz3-1', [{ type: 't', data: null }]);
      const [e] = await readers[3]!.waitForEvents(1);
      assert.equal(e!.position, 202);
      assert.equal(pages[pagesAtCaughtUp]!.after, 201, 'its own read starts at the match');
    } finally {
      for (const r of readers) await r.stop();
      await service.close();
      await store.close();
    }
  });
});

describe('narrow subscriptions that start at a quiet head', () => {
  it('read no pages of their own while nothing is appended: their polls read the shared tail', async () => {
    const { store, pages, keys, source } = recordingSource(true);
    const service = new SubscriptionService(source, new MemorySubscriptionState(), { pollIntervalMs: 20 });
    const readers: Reader[] = [];
    try {
      await store.append('other-0', [{ type: 't', data: null }]);
      readers.push(...(await caughtUpNarrowReaders(service, 'quiet', 'end')));
      const pagesAtCaughtUp = pages.length;
      const keysAtCaughtUp = keys.length;
      await until(() => keys.length >= keysAtCaughtUp + 5, { message: 'five more reads of the tail' });
      assert.equal(pages.length, pagesAtCaughtUp, 'no subscription read pages of events for itself');
      assert.ok(
        keys.slice(keysAtCaughtUp).every((k) => k.after === 1 && k.through === 1),
        'the tail reads start at the head',
      );
      // A matching event is still delivered, read from its position.
      await store.append('zz3-1', [{ type: 't', data: null }]);
      const [e] = await readers[3]!.waitForEvents(1);
      assert.equal(e!.position, 2);
      assert.equal(pages[pagesAtCaughtUp]!.after, 1, 'its own read starts at the match');
      assert.ok(readers.every((r, i) => i === 3 || r.events.length === 0));
    } finally {
      for (const r of readers) await r.stop();
      await service.close();
      await store.close();
    }
  });
});

describe('lag of many consumers', () => {
  it('is one read of their positions when they are near each other, and a count only for those with matching events', async () => {
    const store = createMemoryStore();
    const counts: { after: number; upTo: number }[] = [];
    const groups: { after: number; upTo: number }[] = [];
    const source: SubscriptionSource = {
      readAll: (o) => store.readAll(o),
      headPosition: () => store.headPosition(),
      countMatching(after, upTo, filter) {
        counts.push({ after, upTo });
        return store.countMatching(after, upTo, filter);
      },
      groupKeys(after, upTo) {
        groups.push({ after, upTo });
        return store.groupKeys(after, upTo);
      },
    };
    const service = new SubscriptionService(source, new MemorySubscriptionState());
    try {
      const total = EXACT_LAG_LIMIT + 1_000;
      for (let i = 0; i < total; i += 500) {
        await store.append(
          i === 0 ? 'mine-1' : `other-${i}`,
          Array.from({ length: 500 }, () => ({ type: 't', data: null })),
        );
      }
      await (await service.subscribe('narrow_v1', { filter: { categories: ['mine'] } })).close();
      for (let i = 0; i < 20; i++) {
        await (await service.subscribe(`none_${i}_v1`, { filter: { categories: [`zz${i}`] } })).close();
      }
      const infos = await service.consumers.list();
      const lag = new Set(infos.filter((i) => i.name.startsWith('none_')).map((i) => i.lag));
      assert.deepEqual([...lag], [1_000]);
      assert.equal(infos.find((i) => i.name === 'narrow_v1')!.lag, 500 + 1_000);
      assert.deepEqual(counts, [{ after: 0, upTo: EXACT_LAG_LIMIT }], 'one count: the consumer with matches');
      assert.deepEqual(groups, [{ after: 0, upTo: EXACT_LAG_LIMIT }], 'the positions counted, grouped once');
    } finally {
      await service.close();
      await store.close();
    }
  });
});

describe('closing a narrow subscription', () => {
  it('stores the position past the events its filter left out, so the next owner does not read them again', async () => {
    const { store, reads, service, close } = recordingService();
    const filter = { categories: ['zz'] };
    try {
      await store.append('other-1', [{ type: 't', data: null }]);
      const reader = new Reader(await service.subscribe('narrow_v1', { filter }));
      await reader.waitFor(() => reader.messages.some((m) => m.kind === 'caught_up'), 'caught_up');
      for (let i = 0; i < 5; i++) await store.append(`other-${i}`, [{ type: 't', data: null }]);
      await until(() => reads.some((r) => r.through === 6), { message: 'a read through position 6' });
      await reader.stop();
      assert.equal((await service.consumers.get('narrow_v1')).position, 6);
      const again = await service.subscribe('narrow_v1', { filter });
      assert.equal(again.startPosition, 6);
      await again.close();
    } finally {
      await close();
    }
  });
});

describe('lag', () => {
  it('is one count over at most EXACT_LAG_LIMIT positions per consumer, plus the positions beyond', async () => {
    const store = createMemoryStore();
    const counts: { after: number; upTo: number }[] = [];
    const source: SubscriptionSource = {
      readAll: (o) => store.readAll(o),
      headPosition: () => store.headPosition(),
      countMatching(after, upTo, filter) {
        counts.push({ after, upTo });
        return store.countMatching(after, upTo, filter);
      },
    };
    const service = new SubscriptionService(source, new MemorySubscriptionState());
    try {
      const total = EXACT_LAG_LIMIT + 1_000;
      for (let i = 0; i < total; i += 500) {
        await store.append(
          i === 0 ? 'mine-1' : `other-${i}`,
          Array.from({ length: 500 }, () => ({ type: 't', data: null })),
        );
      }
      // Registered at the start, never run: 500 matching events among the positions counted.
      await (await service.subscribe('narrow_v1', { filter: { categories: ['mine'] } })).close();
      await (await service.subscribe('none_v1', { filter: { categories: ['zz'] } })).close();
      const infos = await service.consumers.list();
      const lag = Object.fromEntries(infos.map((i) => [i.name, i.lag]));
      assert.deepEqual(lag, { narrow_v1: 500 + 1_000, none_v1: 1_000 });
      assert.equal(counts.length, 2);
      assert.ok(counts.every((c) => c.upTo - c.after === EXACT_LAG_LIMIT));
    } finally {
      await service.close();
      await store.close();
    }
  });
});
