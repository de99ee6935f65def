import { randomUUID } from 'node:crypto';

/** A UUID in lower case (the form idem stores), and one in any case. */
const LOWER_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ANY_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for any RFC 9562 textual UUID (any version), case-insensitive: 8-4-4-4-12 hex digits. */
export function isUuid(value: string): boolean {
  return value.length === 36 && (LOWER_UUID.test(value) || ANY_UUID.test(value));
}

/**
 * `value` as idem stores a UUID (lower case), or `null` when it is not one. The check every appended
 * event's id goes through: one regular expression for the usual lower-case id (2026-12-03, ad hoc:
 * about half the time of the character loop it replaced, which then also looked for capitals).
 */
export function normalizeUuid(value: string): string | null {
  if (value.length !== 36) return null;
  if (LOWER_UUID.test(value)) return value;
  return ANY_UUID.test(value) ? value.toLowerCase() : null;
}

let lastMs = 0;
let seq = 0;

/**
 * A UUIDv7 (RFC 9562): 48-bit Unix milliseconds, then a 12-bit counter in rand_a so ids made in the
 * same millisecond by this process still sort in creation order, then 62 random bits (taken from
 * `randomUUID`, whose entropy is buffered and so much cheaper per call than `randomBytes`).
 */
export function uuidv7(now: number = Date.now()): string {
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
  const ts = now.toString(16).padStart(12, '0');
  // randomUUID() is a v4: its last 17 characters carry the RFC variant bits and 62 random bits.
  return `${ts.slice(0, 8)}-${ts.slice(8, 12)}-7${seq.toString(16).padStart(3, '0')}-${randomUUID().slice(19)}`;
}
