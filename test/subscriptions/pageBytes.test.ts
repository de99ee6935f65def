// A delivered page ends at MAX_PAGE_BYTES, but an event larger than that (a store opened with a
// higher maxEventBytes) is still delivered, alone in its page: delivery never stalls on it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventStore } from '../../src/core/eventStore.js';
import { MAX_PAGE_BYTES } from '../../src/core/limits.js';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { pgTestContext } from '../postgres/pgFixtures.js';
import { randomConsumer, randomStream } from '../support/names.js';
import { tempDir } from '../support/tempDir.js';
import { nextEvents } from './suite/context.js';

const pg = await pgTestContext();
const limits = { maxEventBytes: 2 * MAX_PAGE_BYTES };

const stores: [string, () => Promise<{ store: EventStore; cleanup: () => Promise<void> }>, string | false][] =
  [
    [
      'memory',
      () => Promise.resolve({ store: createMemoryStore({ limits }), cleanup: () => Promise.resolve() }),
      false,
    ],
    [
      'SQLite',
      async () => {
        const dir = tempDir();
        const store = await openSqliteStore({ path: dir.file('events.db'), limits });
        return {
          store,
          cleanup: async () => {
            await store.close();
            await dir.cleanup();
          },
        };
      },
      false,
    ],
    [
      'PostgreSQL',
      async () => {
        const store = await pg.openStore({ limits });
        return { store, cleanup: () => store.close() };
      },
      pg.skip,
    ],
  ];

for (const [name, make, skip] of stores) {
  describe(`page byte bound on ${name}`, { skip }, () => {
    it('delivers an event over the page bound alone in its page, then the small ones after it', async () => {
      const { store, cleanup } = await make();
      try {
        const stream = randomStream();
        const huge = 'h'.repeat(MAX_PAGE_BYTES + 1000);
        await store.append(stream, [{ type: 'huge', data: huge }]);
        await store.append(stream, [{ type: 'huge', data: huge }]);
        await store.append(stream, [
          { type: 'small', data: 1 },
          { type: 'small', data: 2 },
        ]);
        const sub = await store.subscribe(randomConsumer(), { batchSize: 100 });
        try {
          const it = sub[Symbol.asyncIterator]();
          const pages: string[][] = [];
          while (pages.flat().length < 4) {
            const batch = await nextEvents(it);
            pages.push(batch.events.map((e) => e.type));
            await sub.ack(batch.events[batch.events.length - 1]!.position);
          }
          assert.deepEqual(pages, [['huge'], ['huge'], ['small', 'small']]);
        } finally {
          await sub.close();
        }
      } finally {
        await cleanup();
      }
    });
  });
}
