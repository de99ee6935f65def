/**
 * One-dimensional PostgreSQL arrays in the binary wire format (what `array_send` writes and
 * `array_recv` reads). `pg` sends a Buffer parameter in binary format, so a statement that casts
 * the parameter to the array type (`$1::text[]`) receives it without the text format's quoting:
 * this process does not escape every quote and backslash of every event's JSON, and the server
 * does not scan them back out, which for a group of a few thousand events was a large part of the
 * statement's time.
 *
 * Layout (all integers big-endian): ndim (1), has-nulls flag (0), element type OID, then the one
 * dimension's length and lower bound (1), then per element its byte length and bytes.
 */

/** Built-in type OIDs (fixed in every PostgreSQL release). */
const TEXT_OID = 25;
const INT4_OID = 23;
const UUID_OID = 2950;

const HEADER = 20;

function header(buf: Buffer, length: number, oid: number): void {
  buf.writeInt32BE(1, 0);
  buf.writeInt32BE(0, 4);
  buf.writeInt32BE(oid, 8);
  buf.writeInt32BE(length, 12);
  buf.writeInt32BE(1, 16);
}

/** A `text[]` parameter. The strings must not contain U+0000 (PostgreSQL text cannot hold it). */
export function textArray(values: readonly string[]): Buffer {
  // Upper bound: 3 bytes per UTF-16 code unit (a surrogate pair, 2 units, is 4 bytes in UTF-8).
  let max = HEADER + 4 * values.length;
  for (const v of values) max += 3 * v.length;
  const buf = Buffer.allocUnsafe(max);
  header(buf, values.length, TEXT_OID);
  let at = HEADER;
  for (const v of values) {
    const n = buf.write(v, at + 4, 'utf8');
    buf.writeInt32BE(n, at);
    at += 4 + n;
  }
  return buf.subarray(0, at);
}

/** An `int4[]` parameter. */
export function int4Array(values: readonly number[]): Buffer {
  const buf = Buffer.allocUnsafe(HEADER + 8 * values.length);
  header(buf, values.length, INT4_OID);
  let at = HEADER;
  for (const v of values) {
    buf.writeInt32BE(4, at);
    buf.writeInt32BE(v, at + 4);
    at += 8;
  }
  return buf;
}

/** Hex digit values by character code (-1: not a hex digit). */
const HEX = new Int8Array(128).fill(-1);
for (let c = 0; c < 10; c++) HEX[48 + c] = c;
for (let c = 0; c < 6; c++) {
  HEX[65 + c] = 10 + c;
  HEX[97 + c] = 10 + c;
}

/** A `uuid[]` parameter from canonical (hyphenated, 36-character) UUID strings. */
export function uuidArray(values: readonly string[]): Buffer {
  const buf = Buffer.allocUnsafe(HEADER + 20 * values.length);
  header(buf, values.length, UUID_OID);
  let at = HEADER;
  for (const v of values) {
    if (v.length !== 36) throw new Error(`not a canonical UUID: ${v}`);
    buf.writeInt32BE(16, at);
    at += 4;
    // The 32 hex digits in pairs, skipping the hyphens at 8, 13, 18 and 23: one pass, no substrings.
    let bad =
      v.charCodeAt(8) !== 45 || v.charCodeAt(13) !== 45 || v.charCodeAt(18) !== 45 || v.charCodeAt(23) !== 45;
    for (let i = 0; i < 36; i += 2) {
      if (i === 8 || i === 13 || i === 18 || i === 23) i++;
      const hi = HEX[v.charCodeAt(i)] ?? -1;
      const lo = HEX[v.charCodeAt(i + 1)] ?? -1;
      if (hi < 0 || lo < 0) bad = true;
      buf[at++] = (hi << 4) | lo;
    }
    if (bad) throw new Error(`not a canonical UUID: ${v}`);
  }
  return buf;
}
