import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { isUuid, normalizeUuid, uuidv7 } from '../../src/core/uuid.js';

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
});
