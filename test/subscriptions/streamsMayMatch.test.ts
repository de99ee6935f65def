// `streamsMayMatch` of the stores that offer it (SQLite; PostgreSQL where the stream column sorts by
// code point): whether any stored stream is one a filter's categories or prefixes want, by index
// probes, exactly as matching every stored stream would say; and the shared tail's use of it: an idle
// subscription whose streams do not exist reads no keys of the busy log, and one that starts far
// behind the head skips to it without reading the events between.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { EventStore } from '../../src/core/eventStore.js';
import { matchesStream, type EventFilter } from '../../src/core/filter.js';
import type { SubscriptionSource } from '../../src/subscriptions/subscriptionSource.js';
import { openPostgresStore } from '../../src/postgres/index.js';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { pgTestContext } from '../postgres/pgFixtures.js';
import { createTempDatabase } from '../support/postgres.js';
import { tempDir } from '../support/tempDir.js';
import { until } from '../support/until.js';
import { Reader } from './suite/context.js';

/** What these tests use of a store that offers the probe. */
type ProbingStore = EventStore &
  Required<Pick<SubscriptionSource, 'streamsMayMatch' | 'scanKeys' | 'scanPage'>>;

interface Adapter {
  name: string;
  skip: string | false;
  /** A new, empty store, and a second handle on it (as another process would hold). */
  open(): Promise<{ store: ProbingStore; other: () => Promise<EventStore>; cleanup: () => Promise<void> }>;
}

const pg = await pgTestContext();

const adapters: Adapter[] = [
  {
    name: 'SQLite',
    skip: false,
    async open() {
      const dir = tempDir();
      const store = await openSqliteStore({ path: dir.file('events.db') });
      return {
        store,
        other: () => openSqliteStore({ path: store.path }),
        cleanup: async () => {
          await store.close();
          await dir.cleanup();
        },
      };
    },
  },
  {
    // The test database's collation is the server's default: C.UTF-8 here (CI included).
    name: 'PostgreSQL',
    skip: pg.skip,
    async open() {
      const store = await pg.openStore();
      return {
        store,
        other: () => pg.openStore({ schema: store.schema }),
        cleanup: () => store.close(),
      };
    },
  },
];

/** Names built from parts that sort on either side of '-' and across UTF-8 lengths. */
const part = fc.constantFrom('a', 'ab', 'a.', 'a0', 'b', 'B', 'é', 'éa', '\u{1F600}', '\uFFFD', 'z');
const nameArb = fc
  .array(part, { minLength: 1, maxLength: 3 })
  .chain((parts) => fc.constantFrom(parts.join('-'), parts.join(''), `${parts.join('-')}-`));

/** 12,000 positions of a stream no test filter wants: past the 5,000 a stored cursor may trail its read position. */
async function busyLog(store: EventStore): Promise<void> {
  for (let i = 0; i < 24; i++) {
    await store.append(
      'other-1',
      Array.from({ length: 500 }, (_, j) => ({ type: 't', data: { j } })),
    );
  }
}

for (const adapter of adapters) {
  describe(`${adapter.name} streamsMayMatch`, { skip: adapter.skip }, () => {
    it('says whether a stored stream matches the filter’s categories or prefixes, as matching each would', async () => {
      const { store, cleanup } = await adapter.open();
      const stored = new Set<string>();
      try {
        await fc.assert(
          fc.asyncProperty(
            fc.array(nameArb, { maxLength: 3 }),
            fc.array(
              fc.record(
                {
                  categories: fc.array(nameArb, { minLength: 1, maxLength: 3 }),
                  streamPrefixes: fc.array(nameArb, { minLength: 1, maxLength: 3 }),
                },
                { requiredKeys: [] },
              ),
              { minLength: 1, maxLength: 8 },
            ),
            async (streams, filters) => {
              for (const stream of streams) {
                // The trailing-dash names are prefixes only: a stream name may not end that way.
                if (stream.endsWith('-') || stored.has(stream)) continue;
                await store.append(stream, [{ type: 't', data: null }]);
                stored.add(stream);
              }
              for (const filter of filters) {
                const answer = await store.streamsMayMatch(filter);
                const expected =
                  (filter.categories ?? []).length + (filter.streamPrefixes ?? []).length === 0 ||
                  [...stored].some((s) => matchesStream(filter, s));
                assert.deepEqual(
                  answer,
                  expected ? { may: true } : { may: false, head: stored.size },
                  `${JSON.stringify(filter)} over ${JSON.stringify([...stored])}`,
                );
              }
            },
          ),
          { numRuns: 60 },
        );
      } finally {
        await cleanup();
      }
    });

    it('lets an idle subscription whose streams do not exist follow a busy log without reading its keys', async () => {
      const { store, other: openOther, cleanup } = await adapter.open();
      const other = await openOther();
      let keyReads = 0;
      const scanKeys = store.scanKeys.bind(store);
      store.scanKeys = (after, maxScan) => {
        keyReads++;
        return scanKeys(after, maxScan);
      };
      const filter: EventFilter = { streamPrefixes: ['nobody-'] };
      const reader = new Reader(await store.subscribe('idle_probe_v1', { filter }));
      try {
        await reader.waitFor(() => reader.messages.some((m) => m.kind === 'caught_up'), 'caught_up');
        await busyLog(other);
        // Its stored cursor follows the log: of 12,000 positions, whatever its first move at a tick,
        // the log runs on 5,000 (what a cursor may trail its read position by) past it, or it is past 5,000.
        await until(async () => (await store.consumers.get('idle_probe_v1')).position >= 5_000, {
          message: 'the cursor past 5,000',
        });
        assert.equal(keyReads, 0);
        // Once the filter's streams exist it reads keys again, and gets its event.
        const position = (await other.append('nobody-1', [{ type: 't', data: null }])).lastPosition;
        await reader.waitForEvents(1);
        assert.deepEqual(reader.positions, [position]);
      } finally {
        await reader.stop();
        await other.close();
        await cleanup();
      }
    });

    it('lets a new subscription whose streams do not exist skip a long log without reading it', async () => {
      const { store, cleanup } = await adapter.open();
      let reads = 0;
      const scanKeys = store.scanKeys.bind(store);
      store.scanKeys = (after, maxScan) => {
        reads++;
        return scanKeys(after, maxScan);
      };
      const scanPage = store.scanPage.bind(store);
      store.scanPage = (after, filter, limit, maxScan, maxBytes) => {
        reads++;
        return scanPage(after, filter, limit, maxScan, maxBytes);
      };
      await busyLog(store);
      const reader = new Reader(
        await store.subscribe('far_behind_v1', { filter: { categories: ['nobody'] } }),
      );
      try {
        await reader.waitFor(() => reader.messages.some((m) => m.kind === 'caught_up'), 'caught_up');
        assert.deepEqual(
          reader.messages.find((m) => m.kind === 'caught_up'),
          { kind: 'caught_up', position: 12_000 },
        );
        assert.equal(reads, 0);
      } finally {
        await reader.stop();
        await cleanup();
      }
    });
  });
}

describe('PostgreSQL streamsMayMatch, probes asked together', { skip: pg.skip }, () => {
  it('answers the probes asked in one turn of the event loop with one statement', async () => {
    const store = await pg.openStore();
    try {
      await store.append('acct-7', [{ type: 't', data: null }]);
      await store.streamsMayMatch({ categories: ['warm'] });
      let statements = 0;
      const query = store.pool.query.bind(store.pool) as (...args: unknown[]) => unknown;
      store.pool.query = ((...args: unknown[]) => {
        const text = (args[0] as { text?: string }).text ?? '';
        if (text.includes('e.stream >= p.t')) statements++;
        return query(...args);
      }) as typeof store.pool.query;
      const filters: EventFilter[] = Array.from({ length: 20 }, (_, i) =>
        i % 2 === 0 ? { streamPrefixes: [`idle-${i}-`] } : { categories: [i === 7 ? 'acct' : `none${i}`] },
      );
      const answers = await Promise.all(filters.map((f) => store.streamsMayMatch(f)));
      assert.deepEqual(
        answers,
        filters.map((_, i) => (i === 7 ? { may: true } : { may: false, head: 1 })),
      );
      assert.equal(statements, 1);
    } finally {
      await store.close();
    }
  });
});

describe(
  'PostgreSQL streamsMayMatch under a collation that does not sort by code point',
  { skip: pg.skip },
  () => {
    it('answers that it cannot tell (may: true) without a statement, so the tail reads keys', async () => {
      // ICU's en-US sorts 'a' < 'A' < 'a-c' < 'ab' < 'B': streams sharing a prefix need not sit
      // together in the index. The database's libc collation still reads "C.UTF-8".
      let db;
      try {
        db = await createTempDatabase(
          'idem_icu',
          "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'",
        );
      } catch (err) {
        assert.fail(`PostgreSQL 15 or later with ICU is needed for this test: ${(err as Error).message}`);
      }
      const store = await openPostgresStore({ connectionString: db.connectionString });
      try {
        await store.append('acct-1', [{ type: 't', data: null }]);
        // The first answer asks for the collation once; later ones send nothing.
        assert.deepEqual(await store.streamsMayMatch({ categories: ['nobody'] }), { may: true });
        let statements = 0;
        const query = store.pool.query.bind(store.pool) as (...args: unknown[]) => unknown;
        store.pool.query = ((...args: unknown[]) => {
          statements++;
          return query(...args);
        }) as typeof store.pool.query;
        assert.deepEqual(await store.streamsMayMatch({ streamPrefixes: ['zzz'] }), { may: true });
        assert.deepEqual(await store.streamsMayMatch({ categories: ['nobody'], streamPrefixes: ['a'] }), {
          may: true,
        });
        assert.equal(statements, 0);
        // The tail's scan for resting subscriptions compares by code point under this collation too.
        assert.deepEqual(await store.firstStreamMatch(0, ['acct-'], []), { head: 1, first: 1 });
        assert.deepEqual(await store.firstStreamMatch(0, ['Acct-', 'acct-1x'], ['ACCT', 'acct-']), {
          head: 1,
          first: null,
        });
        assert.deepEqual(await store.firstStreamMatch(0, [], ['acct']), { head: 1, first: 1 });
      } finally {
        await store.close();
        await db.drop();
      }
    });
  },
);
