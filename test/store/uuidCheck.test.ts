import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { createUuidV7Generator, isUuid, normalizeUuid, uuidv7 } from '../../src/core/uuid.js';

const HEX = '0123456789abcdefABCDEF';

/** The rule written out by hand: 36 characters, dashes at 8, 13, 18 and 23, hex digits elsewhere. */
function reference(s: string): boolean {
  if (s.length !== 36) return false;
  for (let i = 0; i < 36; i++) {
    if (i === 8 || i === 13 || i === 18 || i === 23) {
      if (s[i] !== '-') return false;
    } else if (!HEX.includes(s[i]!)) {
      return false;
    }
  }
  return true;
}

/** The Unix millisecond in an id's first 48 bits. */
function millisecondOf(id: string): number {
  return parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
}

function agree(s: string): void {
  const expected = reference(s) ? s.toLowerCase() : null;
  assert.equal(normalizeUuid(s), expected, `normalizeUuid(${JSON.stringify(s)})`);
  assert.equal(isUuid(s), expected !== null, `isUuid(${JSON.stringify(s)})`);
}

describe('UUID check of appended ids', () => {
  it('agrees with the rule on near-UUIDs: any case, one character changed, one too many or too few (fast-check)', () => {
    const uuidLike = fc
      .tuple(
        fc.uuid(),
        fc.array(fc.boolean(), { minLength: 36, maxLength: 36 }),
        fc.nat(40),
        fc.constantFrom('', 'g', 'G', '-', ' ', '\n', '\u00e9', '0', 'ff'),
        fc.constantFrom('replace', 'insert', 'none', 'drop'),
      )
      .map(([u, upper, at, ch, how]) => {
        const cased = [...u].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join('');
        const i = Math.min(at, cased.length);
        if (how === 'replace') return cased.slice(0, i) + ch + cased.slice(i + 1);
        if (how === 'insert') return cased.slice(0, i) + ch + cased.slice(i);
        if (how === 'drop') return cased.slice(0, i) + cased.slice(i + 1);
        return cased;
      });
    fc.assert(
      fc.property(fc.oneof(uuidLike, fc.string({ maxLength: 40 })), (s) => agree(s)),
      { numRuns: 3000 },
    );
  });

  it('keeps a lower-case id as it is and lower-cases any other', () => {
    const v4 = randomUUID();
    const v7 = uuidv7();
    assert.equal(normalizeUuid(v4), v4);
    assert.equal(normalizeUuid(v7), v7);
    assert.equal(normalizeUuid(v4.toUpperCase()), v4);
    for (const bad of ['', `${v4}\n`, `\n${v4}`, v4.slice(1), v4.replaceAll('-', ''), `{${v4.slice(1, -1)}}`])
      agree(bad);
    assert.equal(normalizeUuid(`${v4.slice(0, 35)}\n`), null);
  });

  it('uuidv7: version 7, RFC variant, the millisecond in the first 48 bits, creation order within a millisecond and past 4,096 ids in one', () => {
    // A generator of the test's own, on a clock the test sets: nothing depends on when it runs.
    const now = 1_700_000_000_123;
    let clock = now;
    const uuidv7At = createUuidV7Generator({ now: () => clock });
    const ids = Array.from({ length: 5000 }, () => uuidv7At());
    for (const id of ids) {
      assert.equal(normalizeUuid(id), id, id);
      assert.equal(id[14], '7', `version of ${id}`);
      assert.match(id[19]!, /[89ab]/, `variant of ${id}`);
    }
    assert.equal(millisecondOf(ids[0]!), now);
    // 4,096 ids fit the 12-bit counter of one millisecond; the next ones borrow the following millisecond.
    assert.equal(millisecondOf(ids[4095]!), now);
    assert.equal(millisecondOf(ids[4096]!), now + 1);
    assert.deepEqual([...ids].sort(), ids, 'ids sort in creation order');
    assert.equal(new Set(ids).size, ids.length);
    // A clock that goes back does not make an id that sorts before the last one.
    clock = now - 5000;
    const earlier = uuidv7At();
    assert.ok(earlier > ids[ids.length - 1]!, `${earlier} sorts after ${ids[ids.length - 1]}`);
    // Once the clock passes the last millisecond used, ids carry the clock's millisecond again.
    clock = now + 10;
    assert.equal(millisecondOf(uuidv7At()), now + 10);
  });

  it('uuidv7: the process generator stamps the current millisecond and never goes back', () => {
    const before = Date.now();
    const a = uuidv7();
    const b = uuidv7();
    const after = Date.now();
    assert.ok(
      millisecondOf(a) >= before && millisecondOf(a) <= after + 1,
      `${a} made between ${before} and ${after}`,
    );
    assert.ok(b > a, `${b} sorts after ${a}`);
  });

  it('uuidv7: the 62 random bits vary (each of the 16 hex digits appears at every random place)', () => {
    const ids = Array.from({ length: 4000 }, () => uuidv7());
    for (const place of [20, 21, 22, 24, 30, 35]) {
      const seen = new Set(ids.map((id) => id[place]));
      assert.equal(seen.size, 16, `place ${place}: ${[...seen].sort().join('')}`);
    }
    const variants = new Set(ids.map((id) => id[19]));
    assert.deepEqual([...variants].sort(), ['8', '9', 'a', 'b']);
  });
});
