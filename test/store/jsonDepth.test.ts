import assert from 'node:assert/strict';
import { MAX_JSON_DEPTH, type EventStore, type JsonValue } from '../../src/index.js';
import { pgTestContext } from '../postgres/pgFixtures.js';
import { onEveryStore } from '../support/everyStore.js';

const pg = await pgTestContext();

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

onEveryStore(pg, 'event data nesting limit (no stack overflow on deep JSON)', check);
