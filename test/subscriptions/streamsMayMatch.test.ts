// SQLite's `streamsMayMatch`: whether any stored stream is one a filter's categories or prefixes
// want, by index probes, exactly as matching every stored stream would say; and the shared tail's
// use of it: an idle subscription whose streams do not exist reads no keys of the busy log.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { matchesStream, type EventFilter } from '../../src/core/filter.js';
import { openSqliteStore, type SqliteEventStore } from '../../src/sqlite/sqliteStore.js';
import { tempDir } from '../support/tempDir.js';
import { until } from '../support/until.js';
import { Reader } from './suite/context.js';

/** Names built from parts that sort on either side of '-' and across UTF-8 lengths. */
const part = fc.constantFrom('a', 'ab', 'a.', 'a0', 'b', 'é', 'éa', '\u{1F600}', '\uFFFD', 'z');
const nameArb = fc
  .array(part, { minLength: 1, maxLength: 3 })
  .chain((parts) => fc.constantFrom(parts.join('-'), parts.join(''), `${parts.join('-')}-`));

async function withStore<T>(fn: (store: SqliteEventStore) => Promise<T>): Promise<T> {
  const dir = tempDir();
  const store = await openSqliteStore({ path: dir.file('events.db') });
  try {
    return await fn(store);
  } finally {
    await store.close();
    await dir.cleanup();
  }
}

describe('SQLite streamsMayMatch', () => {
  it('says whether a stored stream matches the filter’s categories or prefixes, as matching each would', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(nameArb, { maxLength: 6 }),
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
        (streams, filters) =>
          withStore(async (store) => {
            for (const stream of streams) {
              // The trailing-dash names are prefixes only: a stream name may not end that way.
              if (!stream.endsWith('-')) await store.append(stream, [{ type: 't', data: null }]);
            }
            const stored = streams.filter((s) => !s.endsWith('-'));
            for (const filter of filters) {
              const { head, may } = await store.streamsMayMatch(filter);
              assert.equal(head, stored.length);
              const expected =
                (filter.categories ?? []).length + (filter.streamPrefixes ?? []).length === 0 ||
                stored.some((s) => matchesStream(filter, s));
              assert.equal(may, expected, `${JSON.stringify(filter)} over ${JSON.stringify(stored)}`);
            }
          }),
      ),
      { numRuns: 60 },
    );
  });

  it('lets an idle subscription whose streams do not exist follow a busy log without reading its keys', () =>
    withStore(async (store) => {
      const path = store.path;
      const other = await openSqliteStore({ path });
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
        for (let i = 0; i < 24; i++) {
          await other.append(
            'other-1',
            Array.from({ length: 500 }, (_, j) => ({ type: 't', data: { j } })),
          );
        }
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
      }
    }));
});
