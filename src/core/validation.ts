import { InvalidInputError, TooLargeError } from './errors.js';
import type { NewEvent } from './event.js';
import { canonicalJson, isPlainJson, jsonProblem, type JsonObject, type JsonValue } from './json.js';
import { MAX_CONSUMER_NAME_LENGTH, MAX_STREAM_LENGTH, MAX_TYPE_LENGTH, type StoreLimits } from './limits.js';
import { validateSchemaVersion } from './upcasters.js';
import { normalizeUuid, uuidv7 } from './uuid.js';
import { activeTraceparent } from './tracing.js';

/** An event that passed validation, with its JSON text computed once for storage and comparison. */
export interface PreparedEvent {
  id: string;
  type: string;
  data: JsonValue;
  metadata: JsonObject;
  dataJson: string;
  metadataJson: string;
  /** Canonical text of type, data and metadata: equal content gives equal text (computed lazily). */
  readonly contentKey: string;
}

export function validateStreamName(stream: unknown, field = 'stream'): string {
  if (typeof stream !== 'string') throw new InvalidInputError(field, 'must be a string');
  if (stream.length === 0) throw new InvalidInputError(field, 'must not be empty');
  if (stream.length > MAX_STREAM_LENGTH) {
    throw new InvalidInputError(
      field,
      `must be at most ${MAX_STREAM_LENGTH} characters (got ${stream.length})`,
    );
  }
  const problem = textProblem(stream);
  if (problem !== null) throw new InvalidInputError(field, problem);
  if (stream.trim() !== stream) throw new InvalidInputError(field, 'must not start or end with whitespace');
  return stream;
}

export function validateConsumerName(name: unknown, field = 'consumer'): string {
  if (typeof name !== 'string') throw new InvalidInputError(field, 'must be a string');
  if (name.length === 0 || name.length > MAX_CONSUMER_NAME_LENGTH) {
    throw new InvalidInputError(field, `must be 1-${MAX_CONSUMER_NAME_LENGTH} characters`);
  }
  if (!/^[A-Za-z0-9_.:-]+$/.test(name)) {
    throw new InvalidInputError(field, 'may contain only letters, digits and _ . : -');
  }
  return name;
}

export function validatePosition(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidInputError(field, 'must be an integer >= 0');
  }
  return value;
}

export function validateLimit(value: unknown, field = 'limit'): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new InvalidInputError(field, 'must be an integer >= 1');
  }
  return value;
}

function validateType(type: unknown, index: number): string {
  if (
    typeof type === 'string' &&
    type.length > 0 &&
    type.length <= MAX_TYPE_LENGTH &&
    textProblem(type) === null
  )
    return type;
  const field = `events[${index}].type`;
  if (type === undefined || type === null) throw new InvalidInputError(field, 'is required');
  if (typeof type !== 'string') throw new InvalidInputError(field, 'must be a string');
  if (type.length === 0 || type.length > MAX_TYPE_LENGTH) {
    throw new InvalidInputError(field, `must be 1-${MAX_TYPE_LENGTH} characters`);
  }
  throw new InvalidInputError(field, textProblem(type) ?? 'is invalid');
}

/**
 * What makes `s` unfit as a name (stream, type, filter value, owner), or null. Names refuse control
 * characters (C0 including NUL, DEL, C1): they break logs, terminals, URLs and PostgreSQL text. They
 * refuse unpaired surrogates too: those have no UTF-8 form, so a store would keep U+FFFD instead and
 * the name read back would differ from the one written. A loop, cheaper than a regex on short names.
 */
export function textProblem(s: string): string | null {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) return 'must not contain control characters';
    if (c >= 0xd800 && c <= 0xdfff) {
      const next = s.charCodeAt(i + 1);
      if (c >= 0xdc00 || !(next >= 0xdc00 && next <= 0xdfff)) {
        return 'must not contain unpaired surrogates (invalid Unicode)';
      }
      i++;
    }
  }
  return null;
}

/**
 * A free-text label (owner, actor) of 1-`max` characters: any text but control characters and
 * unpaired surrogates.
 */
export function validateLabel(value: unknown, field: string, max = 200): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
    throw new InvalidInputError(field, `must be a string of 1-${max} characters`);
  }
  const problem = textProblem(value);
  if (problem !== null) throw new InvalidInputError(field, problem);
  return value;
}

/** An integer option within `[min, max]`, or `fallback` when absent. */
export function boundedInt(
  value: unknown,
  field: string,
  min: number,
  max: number,
  fallback: number,
): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidInputError(field, `must be an integer from ${min} to ${max}`);
  }
  return value;
}

/** Throws unless `value` is plain JSON; the reason (from `jsonProblem`) is only built then. */
function requirePlainJson(value: unknown, index: number, key: 'data' | 'metadata'): void {
  if (isPlainJson(value)) return;
  const f = `events[${index}].${key}`;
  throw new InvalidInputError(f, `must be JSON-serialisable: ${jsonProblem(value, f) ?? 'unknown problem'}`);
}

/** An event ready to store; its canonical content key is computed on first use only. */
class Prepared implements PreparedEvent {
  private key: string | undefined;
  constructor(
    readonly id: string,
    readonly type: string,
    readonly data: JsonValue,
    readonly metadata: JsonObject,
    readonly dataJson: string,
    readonly metadataJson: string,
  ) {}

  // Only a re-used id needs it, so the common append skips the work.
  get contentKey(): string {
    return (this.key ??= contentKey(this.type, this.data, this.metadata));
  }
}
/** Cached `{}` text: most events carry no metadata. */
const EMPTY_OBJECT_JSON = '{}';

/**
 * Checks one append call's input against every rule and returns the events ready to store.
 * Throws `InvalidInputError` (naming the field and rule) or `TooLargeError`; nothing is written then.
 *
 * This runs for every appended event, so the common path allocates nothing but the results: field
 * names and problem descriptions are only built once a rule is broken.
 */
export function prepareAppend(stream: unknown, events: unknown, limits: StoreLimits): PreparedEvent[] {
  validateStreamName(stream);
  if (!Array.isArray(events)) throw new InvalidInputError('events', 'must be an array');
  const n = events.length;
  if (n === 0) throw new InvalidInputError('events', 'must contain at least one event');
  if (n > limits.maxAppendEvents) {
    throw new InvalidInputError('events', `must contain at most ${limits.maxAppendEvents} events (got ${n})`);
  }
  const ids = n > 1 ? new Set<string>() : null;
  const out: PreparedEvent[] = [];
  // The append's trace, recorded on each event that does not carry one already.
  const traceparent = activeTraceparent();
  // UTF-8 takes at most 3 bytes per UTF-16 code unit: texts shorter than this are within the limit.
  const safeChars = Math.floor(limits.maxEventBytes / 3);
  for (let i = 0; i < n; i++) {
    const raw = events[i] as unknown;
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
      throw new InvalidInputError(`events[${i}]`, 'must be an object');
    }
    const e = raw as Partial<NewEvent> & Record<string, unknown>;
    for (const key in e) {
      if (key !== 'id' && key !== 'type' && key !== 'data' && key !== 'metadata' && Object.hasOwn(e, key)) {
        throw new InvalidInputError(
          `events[${i}].${key}`,
          'is not an event field (id, type, data, metadata)',
        );
      }
    }
    const rawId = e.id;
    let id: string;
    if (rawId === undefined) id = uuidv7();
    else {
      const normal = typeof rawId === 'string' ? normalizeUuid(rawId) : null;
      if (normal === null) throw new InvalidInputError(`events[${i}].id`, 'must be a UUID');
      id = normal;
    }
    if (ids !== null) {
      if (ids.has(id)) throw new InvalidInputError(`events[${i}].id`, 'appears twice in the same append');
      ids.add(id);
    }
    const type = validateType(e.type, i);
    const data = e.data;
    if (data === undefined) {
      throw new InvalidInputError(`events[${i}].data`, 'is required (use null for none)');
    }
    requirePlainJson(data, i, 'data');
    let metadata = e.metadata ?? {};
    if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) {
      throw new InvalidInputError(`events[${i}].metadata`, 'must be a JSON object');
    }
    requirePlainJson(metadata, i, 'metadata');
    if (metadata.schemaVersion !== undefined) {
      validateSchemaVersion(metadata.schemaVersion, `events[${i}].metadata.schemaVersion`);
    }
    const traced = traceparent !== undefined && metadata.traceparent === undefined;
    if (traced) metadata = { ...metadata, traceparent };
    const dataJson = JSON.stringify(data);
    const metadataJson = e.metadata === undefined && !traced ? EMPTY_OBJECT_JSON : JSON.stringify(metadata);
    if (dataJson.length + metadataJson.length > safeChars) {
      const size = Buffer.byteLength(dataJson) + Buffer.byteLength(metadataJson);
      if (size > limits.maxEventBytes) throw new TooLargeError(`events[${i}]`, size, limits.maxEventBytes);
    }
    out.push(new Prepared(id, type, data, metadata, dataJson, metadataJson));
  }
  return out;
}

/** The text that decides whether a re-appended id carries "the same content". */
export function contentKey(type: string, data: JsonValue, metadata: JsonObject): string {
  return `${type}\u0000${canonicalJson(data)}\u0000${canonicalJson(withoutTrace(metadata))}`;
}

/**
 * The metadata without `traceparent`: the trace an append ran in is not the event's content, so a
 * retry from another trace (a command handled again) is still the same append.
 */
function withoutTrace(metadata: JsonObject): JsonObject {
  if (metadata.traceparent === undefined) return metadata;
  const { traceparent: _trace, ...rest } = metadata;
  return rest;
}
