import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { isPlainJson, jsonProblem, MAX_JSON_DEPTH } from '../../src/core/json.js';

// Appends check data with the fast `isPlainJson` and only ask `jsonProblem` for the reason; the two
// walkers must agree on every value, or an append would be refused with "unknown problem" or a bad
// value accepted.
function agree(value: unknown): void {
  assert.equal(isPlainJson(value), jsonProblem(value) === null, 'isPlainJson and jsonProblem disagree');
}

function nested(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = i % 2 === 0 ? [v] : { a: v };
  return v;
}

describe('isPlainJson agrees with jsonProblem', () => {
  it('on arbitrary values (fast-check, 2,000 runs)', () => {
    const odd = fc.oneof(
      fc.constant(undefined),
      fc.constant(NaN),
      fc.constant(Infinity),
      fc.bigInt(),
      fc.constant(Symbol('s')),
      fc.constant(() => 1),
      fc.date(),
      fc.constant(new Map()),
      fc.constant(Object.create(null) as object),
    );
    const value = fc.letrec((tie) => ({
      leaf: fc.oneof(fc.jsonValue({ maxDepth: 2 }), odd),
      node: fc.oneof(
        { depthSize: 'small' },
        tie('leaf'),
        fc.array(tie('node'), { maxLength: 4 }),
        fc.dictionary(fc.string({ maxLength: 4 }), tie('node'), { maxKeys: 4 }),
      ),
    })).node;
    fc.assert(
      fc.property(value, (v) => agree(v)),
      { numRuns: 2000 },
    );
  });

  it('on cycles, shared (non-cyclic) objects, sparse arrays and the depth limit', () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const shared = { x: 1 };
    for (const v of [
      cyclic,
      [cyclic],
      { a: shared, b: shared },
      [shared, shared],
      // eslint-disable-next-line no-sparse-arrays
      [1, , 3],
      nested(MAX_JSON_DEPTH - 1),
      nested(MAX_JSON_DEPTH),
      nested(MAX_JSON_DEPTH + 1),
      Object.assign(Object.create({ inherited: () => 1 }) as object, { own: 1 }),
    ]) {
      agree(v);
    }
    assert.equal(isPlainJson({ a: shared, b: shared }), true);
    assert.equal(isPlainJson(cyclic), false);
  });
});
