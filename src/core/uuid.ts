import { randomFillSync } from 'node:crypto';

/** A UUID in lower case (the form idem stores), and one in any case. */
const LOWER_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ANY_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for any RFC 9562 textual UUID (any version), case-insensitive: 8-4-4-4-12 hex digits. */
export function isUuid(value: string): boolean {
  return value.length === 36 && (LOWER_UUID.test(value) || ANY_UUID.test(value));
}

/**
 * `value` as idem stores a UUID (lower case), or `null` when it is not one. The check every appended
 * event's id goes through: one regular expression for the usual lower-case id, a second only for an
 * id in another case.
 */
export function normalizeUuid(value: string): string | null {
  if (value.length !== 36) return null;
  if (LOWER_UUID.test(value)) return value;
  return ANY_UUID.test(value) ? value.toLowerCase() : null;
}

const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');
/** The id being written: the dashes and the version digit stay, the rest is overwritten per id. */
const text = Buffer.from('00000000-0000-7000-8000-000000000000', 'latin1');
/** Random bytes, 8 taken per id and refilled all at once: one call into the CSPRNG per 512 ids. */
const random = Buffer.alloc(4096);
let randomAt = random.length;

/** Makes UUIDv7 ids; each generator keeps its own last millisecond and counter. */
export type UuidV7Generator = () => string;

export interface UuidV7GeneratorOptions {
  /** The clock, in Unix milliseconds (default `Date.now`). */
  now?: () => number;
}

/**
 * A UUIDv7 generator (RFC 9562) with its own monotonic state: 48-bit Unix milliseconds, then a
 * 12-bit counter in rand_a so ids made in the same millisecond by one generator still sort in
 * creation order (past 4,096 ids in one millisecond it borrows the next millisecond, and a clock that
 * goes back never makes an id that sorts before the last one), then the variant and 62 random bits
 * (from `randomFillSync`, buffered).
 *
 * Written byte by byte into a buffer and read back as one string, so the string comes out flat and
 * checking it or binding it to SQLite later does not first copy pieces together.
 */
export function createUuidV7Generator(options: UuidV7GeneratorOptions = {}): UuidV7Generator {
  const clock = options.now ?? Date.now;
  let lastMs = 0;
  let seq = 0;
  return function uuidv7(): string {
    let now = clock();
    if (now <= lastMs) {
      seq++;
      if (seq > 0xfff) {
        lastMs++;
        seq = 0;
      }
      now = lastMs;
    } else {
      lastMs = now;
      seq = 0;
    }
    return writeId(now, seq);
  };
}

function writeId(now: number, seq: number): string {
  const hex = HEX_DIGITS;
  const t = text;
  // 48 bits do not fit JavaScript's 32-bit bit operations: two halves of 24 bits, 6 digits each,
  // written from the last digit back (the dash at 8 skipped).
  let high = Math.floor(now / 0x1000000);
  let low = now - high * 0x1000000;
  for (let i = 12; i >= 9; i--, low >>>= 4) t[i] = hex[low & 15]!;
  for (let i = 7; i >= 6; i--, low >>>= 4) t[i] = hex[low & 15]!;
  for (let i = 5; i >= 0; i--, high >>>= 4) t[i] = hex[high & 15]!;
  for (let i = 17, s = seq; i >= 15; i--, s >>>= 4) t[i] = hex[s & 15]!;
  if (randomAt + 8 > random.length) {
    randomFillSync(random);
    randomAt = 0;
  }
  // The variant (binary 10) and 2 random bits at 19, 4 at 20, then 7 bytes as 14 digits at 21-22, 24-35.
  const first = random[randomAt]!;
  t[19] = hex[8 | ((first >>> 4) & 3)]!;
  t[20] = hex[first & 15]!;
  let at = 21;
  for (let k = 1; k < 8; k++) {
    const b = random[randomAt + k]!;
    if (at === 23) at = 24;
    t[at++] = hex[b >>> 4]!;
    if (at === 23) at = 24;
    t[at++] = hex[b & 15]!;
  }
  randomAt += 8;
  return t.toString('latin1', 0, 36);
}

/** The process's generator: ids made by it sort in creation order within this process. */
export const uuidv7: UuidV7Generator = createUuidV7Generator();
