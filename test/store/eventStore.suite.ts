/**
 * The behaviour suite of the EventStore port, written against the port only,
 * so that every store runs it: memory, SQLite, PostgreSQL, and the remote client.
 *
 * ```ts
 * describeEventStore('sqlite', async ({ limits } = {}) => {
 *   const dir = tempDir();
 *   const store = openSqliteStore({ path: dir.file('events.db'), ...(limits ? { limits } : {}) });
 *   return { store, cleanup: async () => { await store.close(); await dir.cleanup(); } };
 * });
 * ```
 * `makeStore` is called once per test and must return an empty store opened with the given limits.
 */
import { describe } from 'node:test';
import { appendTests } from './suite/append.js';
import { commandTests, type CommandSuiteOptions } from './suite/commands.js';
import type { MakeStore } from './suite/context.js';
import { expectedVersionTests } from './suite/expectedVersion.js';
import { historyTests } from './suite/history.js';
import { upcastingTests } from './suite/upcasting.js';
import { idempotencyTests } from './suite/idempotency.js';
import { largeReadTests, type LargeReadOptions } from './suite/largeReads.js';
import { nameTests } from './suite/names.js';
import { migrationStatusTests } from './suite/migrationStatus.js';
import { partitionTests } from './suite/partitions.js';
import { readTests } from './suite/reads.js';
import { unknownOptionTests } from './suite/unknownOptions.js';
import { validationTests } from './suite/validation.js';

export type { MakeStore, MakeStoreOptions, StoreFixture } from './suite/context.js';
export { collect, withStore } from './suite/context.js';

export interface EventStoreSuiteOptions extends LargeReadOptions, CommandSuiteOptions {
  /** Passed to `describe`: a skip reason, or false. @default false */
  skip?: string | false;
}

export function describeEventStore(
  name: string,
  makeStore: MakeStore,
  options: EventStoreSuiteOptions = {},
): void {
  describe(`EventStore contract: ${name}`, { skip: options.skip ?? false }, () => {
    appendTests(makeStore);
    idempotencyTests(makeStore);
    expectedVersionTests(makeStore);
    readTests(makeStore);
    largeReadTests(makeStore, options);
    validationTests(makeStore);
    unknownOptionTests(makeStore);
    nameTests(makeStore);
    migrationStatusTests(makeStore);
    commandTests(makeStore, options);
    historyTests(makeStore);
    upcastingTests(makeStore);
    partitionTests(makeStore);
  });
}
