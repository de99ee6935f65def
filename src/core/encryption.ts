/**
 * Crypto-shredding: event data encrypted with one AES-256-GCM key per subject (a person, a
 * customer), so that deleting the key erases the data while the events keep their ids, versions
 * and positions. Pure functions and the cipher over a key provider; the stores hold the keys.
 *
 * The encryption is deterministic per (key, plaintext): the 96-bit IV is an HMAC-SHA256 of the
 * plaintext under a key derived from the subject's key (a synthetic IV, as in AES-SIV). The same
 * event data sealed twice is the same stored text, so an idempotent append of the same id compares
 * equal without decrypting; the price is that two events of one subject with identical data are
 * recognisable as identical in the stored log (and nothing more).
 */
import { createCipheriv, createDecipheriv, createHmac } from 'node:crypto';
import { InvalidInputError } from './errors.js';
import type { NewEvent, RecordedEvent } from './event.js';
import type { JsonObject, JsonValue } from './json.js';
import { checkKnownKeys, type KnownKeys } from './knownKeys.js';
import { MAX_SHREDS_LIMIT } from './limits.js';
import { validateLimit, validatePosition } from './validation.js';

/** Where subject keys live: the store's own key table by default, or your key service. */
export interface KeyProvider {
  /** The keys (32 bytes each) of those `subjects` that have one. */
  keys(subjects: readonly string[]): Promise<Map<string, Buffer>>;
  /** The subject's key, made (32 random bytes) and stored when it has none. */
  create(subject: string): Promise<Buffer>;
  /** Deletes the subject's key for good; true when there was one. */
  delete(subject: string): Promise<boolean>;
}

/** What an event is judged on when choosing its subject (`id` may be absent: the store makes it). */
export type SubjectEvent = { stream: string } & Omit<NewEvent, 'metadata'> & { metadata: JsonObject };

export interface EncryptOptions {
  /** The subject whose key encrypts the event's data, or null to store it in clear. 1-200 characters. */
  subject: (event: SubjectEvent) => string | null;
  /** The key provider. @default a key table in the store itself */
  keys?: KeyProvider;
}

export const ENCRYPT_OPTION_KEYS = { subject: true, keys: true } as const satisfies KnownKeys<EncryptOptions>;

/** The stored `data` of an encrypted event: `{ "$idem_encrypted": { v, subject, iv, ct } }`. */
export const ENVELOPE = '$idem_encrypted';
const MAX_SUBJECT_LENGTH = 200;

interface Envelope {
  v: 1;
  subject: string;
  /** base64 IV (12 bytes). */
  iv: string;
  /** base64 ciphertext followed by the 16-byte tag. */
  ct: string;
}

/** Checks a subject id (from the `subject` function, a CLI argument or a route). */
export function validateSubject(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_SUBJECT_LENGTH)
    throw new InvalidInputError(field, `must be a string of 1-${MAX_SUBJECT_LENGTH} characters`);
  return value;
}

/** The arguments of `store.shreds(afterSeq, limit)` checked, with the default limit filled in. */
export function validateShredsRange(afterSeq: unknown, limit: unknown): { after: number; limit: number } {
  const after = validatePosition(afterSeq, 'after');
  const n = validateLimit(limit) ?? MAX_SHREDS_LIMIT;
  if (n > MAX_SHREDS_LIMIT) throw new InvalidInputError('limit', `must be at most ${MAX_SHREDS_LIMIT}`);
  return { after, limit: n };
}

/** The options checked; `keys` falls back to the store's own table (`own`). */
export function resolveEncryptOptions(
  options: EncryptOptions | undefined,
  own: () => KeyProvider,
): EventCipher | null {
  if (options === undefined) return null;
  checkKnownKeys(options, ENCRYPT_OPTION_KEYS, 'encrypt');
  if (typeof options.subject !== 'function')
    throw new InvalidInputError('encrypt.subject', 'must be a function (event) => subject id | null');
  const keys = options.keys ?? own();
  if (
    typeof keys?.keys !== 'function' ||
    typeof keys.create !== 'function' ||
    typeof keys.delete !== 'function'
  )
    throw new InvalidInputError('encrypt.keys', 'must be a KeyProvider { keys, create, delete }');
  return new EventCipher(options.subject, keys);
}

function ivFor(key: Buffer, plaintext: Buffer): Buffer {
  const ivKey = createHmac('sha256', key).update('idem-iv').digest();
  return createHmac('sha256', ivKey).update(plaintext).digest().subarray(0, 12);
}

/** Encrypts `data` for `subject` under `key`: the same inputs always give the same envelope. */
export function seal(key: Buffer, subject: string, data: JsonValue): JsonObject {
  const plaintext = Buffer.from(JSON.stringify(data), 'utf8');
  const iv = ivFor(key, plaintext);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(subject, 'utf8'));
  const ct = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
  const envelope: Envelope = { v: 1, subject, iv: iv.toString('base64'), ct: ct.toString('base64') };
  return { [ENVELOPE]: envelope as unknown as JsonObject };
}

/** The envelope inside stored `data`, or null when the data is in clear. */
export function envelopeOf(data: JsonValue): Envelope | null {
  if (data === null || typeof data !== 'object' || Array.isArray(data)) return null;
  const e = (data as Record<string, unknown>)[ENVELOPE];
  if (e === null || typeof e !== 'object') return null;
  const env = e as Partial<Envelope>;
  return env.v === 1 &&
    typeof env.subject === 'string' &&
    typeof env.iv === 'string' &&
    typeof env.ct === 'string'
    ? (env as Envelope)
    : null;
}

/** Decrypts an envelope; null when the key is not the one it was sealed with (a shredded and remade key). */
export function open(key: Buffer, env: Envelope): JsonValue | null {
  try {
    const ct = Buffer.from(env.ct, 'base64');
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(env.iv, 'base64'));
    decipher.setAAD(Buffer.from(env.subject, 'utf8'));
    decipher.setAuthTag(ct.subarray(ct.length - 16));
    const plain = Buffer.concat([decipher.update(ct.subarray(0, ct.length - 16)), decipher.final()]);
    return JSON.parse(plain.toString('utf8')) as JsonValue;
  } catch {
    return null;
  }
}

/**
 * A store's encryption: seals the data of appended events whose subject is not null, opens it on
 * reads. Events whose key is gone read back with `data: null` and `metadata.shredded: true`. No key
 * is cached: a shred in another process takes effect on the next read.
 */
export class EventCipher {
  constructor(
    private readonly subjectOf: (event: SubjectEvent) => string | null,
    readonly keys: KeyProvider,
  ) {}

  /** The events with their data sealed (new objects; the caller's are not changed). */
  async seal(stream: string, events: NewEvent[]): Promise<NewEvent[]> {
    if (!Array.isArray(events)) return events;
    const subjects: (string | null)[] = events.map((e, i) => {
      if (e === null || typeof e !== 'object') return null;
      const s = this.subjectOf({ ...e, stream, metadata: e.metadata ?? {} });
      return s === null || s === undefined ? null : validateSubject(s, `events[${i}] subject`);
    });
    const wanted = [...new Set(subjects.filter((s): s is string => s !== null))];
    if (wanted.length === 0) return events;
    const found = await this.keys.keys(wanted);
    for (const s of wanted) if (!found.has(s)) found.set(s, await this.keys.create(s));
    return events.map((e, i) => {
      const s = subjects[i];
      return s ? { ...e, data: seal(found.get(s)!, s, e.data) } : e;
    });
  }

  /** Opens the sealed events of `events` in place; returns them. */
  async open(events: RecordedEvent[]): Promise<RecordedEvent[]> {
    let subjects: Set<string> | null = null;
    for (const e of events) {
      const env = envelopeOf(e.data);
      if (env) (subjects ??= new Set()).add(env.subject);
    }
    if (!subjects) return events;
    const keys = await this.keys.keys([...subjects]);
    for (const e of events) {
      const env = envelopeOf(e.data);
      if (!env) continue;
      const key = keys.get(env.subject);
      const data = key ? open(key, env) : null;
      if (data === null && !(key && isNullData(key, env))) {
        e.data = null;
        e.metadata = { ...e.metadata, shredded: true };
      } else e.data = data;
    }
    return events;
  }

  /** Deletes the subject's key: its events read back with `data: null` from now on. */
  shred(subject: string): Promise<boolean> {
    return this.keys.delete(validateSubject(subject, 'subject'));
  }
}

/** True when an envelope opens to the JSON `null` itself (sealed `data: null`), not a failure. */
function isNullData(key: Buffer, env: Envelope): boolean {
  const sealed = seal(key, env.subject, null)[ENVELOPE] as unknown as Envelope;
  return sealed.ct === env.ct;
}
