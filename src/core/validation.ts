import { InvalidInputError, TooLargeError } from './errors.js';
import type { NewEvent } from './event.js';
import { canonicalJson, jsonProblem, type JsonObject, type JsonValue } from './json.js';
import { MAX_CONSUMER_NAME_LENGTH, MAX_STREAM_LENGTH, MAX_TYPE_LENGTH, type StoreLimits } from './limits.js';
import { isUuid, uuidv7 } from './uuid.js';

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

// Control characters (C0, DEL, C1) are refused in names: they break logs, terminals and URLs.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

export function validateStreamName(stream: unknown, field = 'stream'): string {
  if (typeof stream !== 'string') throw new InvalidInputError(field, 'must be a string');
  if (stream.length === 0) throw new InvalidInputError(field, 'must not be empty');
  if (stream.length > MAX_STREAM_LENGTH) {
    throw new InvalidInputError(field, `must be at most ${MAX_STREAM_LENGTH} characters (got ${stream.length})`);
  }
  if (CONTROL.test(stream)) throw new InvalidInputError(field, 'must not contain control characters');
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

function validateType(type: unknown, field: string): string {
  if (type === undefined || type === null) throw new InvalidInputError(field, 'is required');
  if (typeof type !== 'string') throw new InvalidInputError(field, 'must be a string');
  if (type.length === 0 || type.length > MAX_TYPE_LENGTH) {
    throw new InvalidInputError(field, `must be 1-${MAX_TYPE_LENGTH} characters`);
  }
  if (CONTROL.test(type)) throw new InvalidInputError(field, 'must not contain control characters');
  return type;
}

/**
 * Checks one append call's input against every rule and returns the events ready to store.
 * Throws `InvalidInputError` (naming the field and rule) or `TooLargeError`; nothing is written then.
 */
export function prepareAppend(stream: unknown, events: unknown, limits: StoreLimits): PreparedEvent[] {
  validateStreamName(stream);
  if (!Array.isArray(events)) throw new InvalidInputError('events', 'must be an array');
  if (events.length === 0) throw new InvalidInputError('events', 'must contain at least one event');
  if (events.length > limits.maxAppendEvents) {
    throw new InvalidInputError('events', `must contain at most ${limits.maxAppendEvents} events (got ${events.length})`);
  }
  const ids = new Set<string>();
  return events.map((raw: unknown, i): PreparedEvent => {
    const f = `events[${i}]`;
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new InvalidInputError(f, 'must be an object');
    const e = raw as Partial<NewEvent> & Record<string, unknown>;
    for (const key of Object.keys(e)) {
      if (key !== 'id' && key !== 'type' && key !== 'data' && key !== 'metadata') {
        throw new InvalidInputError(`${f}.${key}`, 'is not an event field (id, type, data, metadata)');
      }
    }
    let id: string;
    if (e.id === undefined) id = uuidv7();
    else if (typeof e.id !== 'string' || !isUuid(e.id)) throw new InvalidInputError(`${f}.id`, 'must be a UUID');
    else id = e.id.toLowerCase();
    if (ids.has(id)) throw new InvalidInputError(`${f}.id`, 'appears twice in the same append');
    ids.add(id);
    const type = validateType(e.type, `${f}.type`);
    if (!('data' in e) || e.data === undefined) throw new InvalidInputError(`${f}.data`, 'is required (use null for none)');
    const dp = jsonProblem(e.data, `${f}.data`);
    if (dp) throw new InvalidInputError(`${f}.data`, `must be JSON-serialisable: ${dp}`);
    const metadata = e.metadata ?? {};
    if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) {
      throw new InvalidInputError(`${f}.metadata`, 'must be a JSON object');
    }
    const mp = jsonProblem(metadata, `${f}.metadata`);
    if (mp) throw new InvalidInputError(`${f}.metadata`, `must be JSON-serialisable: ${mp}`);
    const data = e.data;
    const dataJson = JSON.stringify(data);
    const metadataJson = JSON.stringify(metadata);
    const size = Buffer.byteLength(dataJson) + Buffer.byteLength(metadataJson);
    if (size > limits.maxEventBytes) throw new TooLargeError(f, size, limits.maxEventBytes);
    let key: string | undefined;
    return {
      id,
      type,
      data,
      metadata,
      dataJson,
      metadataJson,
      // Computed on first use: only a re-used id needs it, so the common append skips the work.
      get contentKey() {
        return (key ??= contentKey(type, data, metadata));
      },
    };
  });
}

/** The text that decides whether a re-appended id carries "the same content". */
export function contentKey(type: string, data: JsonValue, metadata: JsonObject): string {
  return `${type}\u0000${canonicalJson(data)}\u0000${canonicalJson(metadata)}`;
}
