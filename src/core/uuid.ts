import { randomUUID } from 'node:crypto';

/** True for any RFC 9562 textual UUID (any version), case-insensitive: 8-4-4-4-12 hex digits. */
export function isUuid(value: string): boolean {
  // A loop over char codes: this runs for every appended event, and is cheaper than a regex.
  if (value.length !== 36) return false;
  for (let i = 0; i < 36; i++) {
    const c = value.charCodeAt(i);
    if (i === 8 || i === 13 || i === 18 || i === 23) {
      if (c !== 45) return false; // '-'
    } else if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102) || (c >= 65 && c <= 70))) {
      return false; // not 0-9, a-f, A-F
    }
  }
  return true;
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
