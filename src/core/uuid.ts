import { randomUUID } from 'node:crypto';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for any RFC 9562 textual UUID (any version), case-insensitive. */
export function isUuid(value: string): boolean {
  return UUID_RE.test(value);
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
