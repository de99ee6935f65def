/**
 * The behaviour suite of the durable-subscription port, written against `EventStore` only,
 * so every store runs it: memory, SQLite, PostgreSQL, and the remote client.
 *
 * ```ts
 * describeSubscriptions('sqlite', async () => {
 *   const dir = tempDir();
 *   const path = dir.file('events.db');
 *   const store = await openSqliteStore({ path });
 *   return {
 *     store,
 *     cleanup: async () => { await store.close(); await dir.cleanup(); },
 *     // optional: a second, independent handle on the same data (as another process would open)
 *     reopen: async () => { const s = await openSqliteStore({ path }); return { store: s, cleanup: () => s.close() }; },
 *   };
 * });
 * ```
 */
import { describe } from 'node:test';
import { ackTests } from './suite/acks.js';
import { adminTests } from './suite/admin.js';
import { bulkDeadLetterTests } from './suite/bulkDeadLetters.js';
import type { MakeStore } from './suite/context.js';
import { deliveryTests } from './suite/delivery.js';
import { leaseTests } from './suite/leases.js';
import { limitTests } from './suite/limits.js';
import { narrowFilterTests } from './suite/narrowFilters.js';
import { parkingTests } from './suite/parking.js';
import { pausingTests } from './suite/pausing.js';
import { redriveTests } from './suite/redrive.js';

export type { MakeStore, StoreFixture } from './suite/context.js';

export function describeSubscriptions(
  name: string,
  makeStore: MakeStore,
  options: { skip?: string | false } = {},
): void {
  describe(`Subscription contract: ${name}`, { skip: options.skip ?? false }, () => {
    deliveryTests(makeStore);
    ackTests(makeStore);
    leaseTests(makeStore);
    parkingTests(makeStore);
    bulkDeadLetterTests(makeStore);
    redriveTests(makeStore);
    adminTests(makeStore);
    pausingTests(makeStore);
    limitTests(makeStore);
    narrowFilterTests(makeStore);
  });
}
