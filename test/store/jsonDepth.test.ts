import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createMemoryStore, MAX_JSON_DEPTH, type EventStore, type JsonValue } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { tempDir } from '../support/index.js';

function nested(depth: number): JsonValue {
  let v: JsonValue = 1;
  for (let i = 0; i < depth; i++) v = i % 2 === 0 ? [v] : { a: v };
  return v;
}

async function check(store: EventStore): Promise<void> {
  const ok = await store.append('deep-1', [{ type: 't', data: nested(MAX_JSON_DEPTH - 1) }]);
  assert.equal(ok.version, 1);
  await assert.rejects(
    store.append('deep-1', [{ type: 't', data: nested(20_000) }]),
    (err: Error & { code?: string; details?: { field?: string } }) => {
      assert.equal(err.code, 'invalid_input');
      assert.equal(err.details?.field, 'events[0].data');
      assert.match(err.message, /nested deeper than 512 levels/);
      return true;
    },
  );
  await assert.rejects(
    store.append('deep-1', [{ type: 't', data: 1, metadata: { m: nested(MAX_JSON_DEPTH + 1) } }]),
    {
      code: 'invalid_input',
    },
  );
  assert.equal(await store.streamVersion('deep-1'), 1, 'nothing written by the rejected appends');
}

describe('event data nesting limit (no stack overflow on deep JSON)', () => {
  it('memory store', () => check(createMemoryStore()));
  it('SQLite store', async () => {
    const dir = tempDir();
    const store = await openSqliteStore({ path: dir.file('deep.db') });
    try {
      await check(store);
    } finally {
      await store.close();
      await dir.cleanup();
    }
  });
});
