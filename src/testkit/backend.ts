import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ConsumerTarget } from '../core/consumerTarget.js';
import type { EventStore } from '../core/eventStore.js';
import { openSqliteStore } from '../sqlite/sqliteStore.js';
import { sqliteTarget, type SqliteTarget } from '../sqlite/target.js';

/** A fresh, empty store and target for one scenario run. */
export interface Workspace<T> {
  store: EventStore;
  target: T;
  /** Closes both and removes what the workspace created. */
  close(): Promise<void>;
}

/** Where scenarios run: every call to `open` gives a new, empty store and target. */
export interface VerifyBackend<T extends ConsumerTarget<unknown>> {
  /** For the report, e.g. `sqlite (temporary files)`. */
  readonly name: string;
  open(): Promise<Workspace<T>>;
}

/**
 * SQLite files in a new temporary directory per workspace: the embedded store and `sqliteTarget`,
 * the same code as in production. Durability `normal`: a scenario never survives an OS crash anyway.
 */
export function sqliteBackend(): VerifyBackend<SqliteTarget> {
  return {
    name: 'sqlite (temporary files)',
    async open() {
      const dir = mkdtempSync(join(tmpdir(), 'idem-verify-'));
      const store = await openSqliteStore({ path: join(dir, 'store.db'), durability: 'normal' });
      const target = sqliteTarget(join(dir, 'target.db'));
      return {
        store,
        target,
        async close() {
          await target.close();
          await store.close();
          rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
        },
      };
    },
  };
}
