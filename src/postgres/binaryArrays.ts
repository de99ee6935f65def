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

/** A `uuid[]` parameter from canonical (hyphenated, 36-character) UUID strings. */
export function uuidArray(values: readonly string[]): Buffer {
  const buf = Buffer.allocUnsafe(HEADER + 20 * values.length);
  header(buf, values.length, UUID_OID);
  let at = HEADER;
  for (const v of values) {
    if (v.length !== 36) throw new Error(`not a canonical UUID: ${v}`);
    buf.writeInt32BE(16, at);
    at += 4;
    at += buf.write(v.slice(0, 8), at, 'hex');
    at += buf.write(v.slice(9, 13), at, 'hex');
    at += buf.write(v.slice(14, 18), at, 'hex');
    at += buf.write(v.slice(19, 23), at, 'hex');
    at += buf.write(v.slice(24, 36), at, 'hex');
  }
  if (at !== buf.length) throw new Error('not a canonical UUID in the list');
  return buf;
}
