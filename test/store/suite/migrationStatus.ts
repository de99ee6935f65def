import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { withStore, type MakeStore } from './context.js';

export function migrationStatusTests(make: MakeStore): void {
  describe('migrationStatus', () => {
    it('reports the schema at the version this code ships once the store is open', () =>
      withStore(make, async (store) => {
        assert.equal(
          typeof store.migrationStatus,
          'function',
          'every built-in store answers migrationStatus',
        );
        const status = await store.migrationStatus!();
        assert.ok(Number.isSafeInteger(status.expected) && status.expected >= 0, JSON.stringify(status));
        assert.equal(status.current, status.expected);
      }));
  });
}
