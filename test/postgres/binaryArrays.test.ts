import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { int4Array, textArray, uuidArray } from '../../src/postgres/binaryArrays.js';
import { pgTestContext } from './pgFixtures.js';

const ctx = await pgTestContext();

describe('binary array parameters', { skip: ctx.skip }, () => {
  it('reach the server exactly as text[], int4[] and uuid[]', async () => {
    const store = await ctx.openSharedStore();
    try {
      const texts = [
        '',
        'plain',
        'NULL',
        '"quoted", {braced}, back\\slash',
        '{"a":"\\u0000 \\" \\\\","b":[1,2]}',
        'é ü 中文 😀 \u{10FFFF}',
        ' leading and trailing ',
        'x'.repeat(100_000),
      ];
      const ints = [0, 1, -1, 2_147_483_647, -2_147_483_648, 100];
      const uuids = [randomUUID(), randomUUID().toUpperCase(), '00000000-0000-0000-0000-000000000000'];
      const r = await store.pool.query<{ t: string[]; i: number[]; u: string[]; n: number }>(
        'SELECT $1::text[] AS t, $2::int4[] AS i, $3::uuid[] AS u, cardinality($4::text[]) AS n',
        [textArray(texts), int4Array(ints), uuidArray(uuids), textArray([])],
      );
      assert.deepEqual(r.rows[0]?.t, texts);
      assert.deepEqual(r.rows[0]?.i, ints);
      assert.deepEqual(
        r.rows[0]?.u,
        uuids.map((u) => u.toLowerCase()),
      );
      assert.equal(r.rows[0]?.n, 0);
    } finally {
      await store.close();
    }
  });

  it('refuse an id that is not a canonical UUID before anything is sent', () => {
    assert.throws(() => uuidArray(['not-a-uuid']), /not a canonical UUID/);
    assert.throws(() => uuidArray(['zzzzzzzz-0000-0000-0000-000000000000']), /not a canonical UUID/);
    assert.throws(() => uuidArray(['000000000-000-0000-0000-000000000000']), /not a canonical UUID/);
    assert.throws(() => uuidArray(['00000000-0000-0000-0000-00000000000é']), /not a canonical UUID/);
    assert.throws(() => uuidArray(['00000000+0000-0000-0000-000000000000']), /not a canonical UUID/);
  });
});
