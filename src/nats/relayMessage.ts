import type { MsgHdrs } from '@nats-io/transport-node';
import type { RecordedEvent } from '../core/event.js';
import type { JsonObject, JsonValue } from '../core/json.js';

/**
 * How one idem event travels as a JetStream message. The body is the event's `data` as JSON text;
 * everything else is in headers, so a subscriber that only wants the payload reads the body alone.
 */
export const RELAY_HEADERS = {
  /** The event id: JetStream's own de-duplication key. */
  id: 'Nats-Msg-Id',
  stream: 'Idem-Stream',
  version: 'Idem-Version',
  position: 'Idem-Position',
  type: 'Idem-Type',
  /** ISO-8601 UTC commit time in the store. */
  recordedAt: 'Idem-Recorded-At',
  /** The event's metadata as JSON text. */
  metadata: 'Idem-Metadata',
} as const;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The message body of an event. */
export function eventBody(event: RecordedEvent): Uint8Array {
  return encoder.encode(JSON.stringify(event.data));
}

/** Writes the event's headers (all but `Nats-Msg-Id`, which the publish option sets) into `h`. */
export function writeEventHeaders(h: MsgHdrs, event: RecordedEvent): MsgHdrs {
  h.set(RELAY_HEADERS.stream, event.stream);
  h.set(RELAY_HEADERS.version, String(event.version));
  h.set(RELAY_HEADERS.position, String(event.position));
  h.set(RELAY_HEADERS.type, event.type);
  h.set(RELAY_HEADERS.recordedAt, event.recordedAt);
  h.set(RELAY_HEADERS.metadata, JSON.stringify(event.metadata));
  return h;
}

/** The values of the relay's headers, first occurrence each; undefined when absent. */
interface EventFields {
  id: string | undefined;
  stream: string | undefined;
  version: string | undefined;
  position: string | undefined;
  type: string | undefined;
  recordedAt: string | undefined;
  metadata: string | undefined;
}

function noFields(): EventFields {
  return {
    id: undefined,
    stream: undefined,
    version: undefined,
    position: undefined,
    type: undefined,
    recordedAt: undefined,
    metadata: undefined,
  };
}

/** Keeps `value` as the header `key`'s when it is one of the relay's and the first of its name. */
function take(f: EventFields, key: string, value: string): void {
  switch (key) {
    case RELAY_HEADERS.id:
      f.id ??= value;
      break;
    case RELAY_HEADERS.stream:
      f.stream ??= value;
      break;
    case RELAY_HEADERS.version:
      f.version ??= value;
      break;
    case RELAY_HEADERS.position:
      f.position ??= value;
      break;
    case RELAY_HEADERS.type:
      f.type ??= value;
      break;
    case RELAY_HEADERS.recordedAt:
      f.recordedAt ??= value;
      break;
    case RELAY_HEADERS.metadata:
      f.metadata ??= value;
      break;
  }
}

/** The event of the header values and body (its bytes, or its text as a TextDecoder reads them). */
function toEvent(f: EventFields, body: Uint8Array | string): RecordedEvent | null {
  const position = f.position ?? '';
  const at = Number(position);
  if (position === '' || !Number.isSafeInteger(at) || at < 1 || !f.id) return null;
  return {
    id: f.id,
    stream: f.stream ?? '',
    version: Number(f.version ?? ''),
    position: at,
    type: f.type ?? '',
    data: JSON.parse(typeof body === 'string' ? body : decoder.decode(body)) as JsonValue,
    metadata: JSON.parse(f.metadata || '{}') as JsonObject,
    recordedAt: f.recordedAt ?? '',
  };
}

/** The idem event carried by a relayed message, or null when the message was not published by a relay. */
export function eventFromMessage(h: MsgHdrs | undefined, body: Uint8Array): RecordedEvent | null {
  if (!h) return null;
  // One pass over the headers: `get` scans every key for each name asked.
  const f = noFields();
  for (const [key, values] of h) take(f, key, values[0] ?? '');
  return toEvent(f, body);
}

/**
 * `eventFromMessage` on a message's header block as it arrived (`NATS/1.0` and `Key: value` lines,
 * each ending in CRLF), as text, read as the NATS client reads it (the key as written, the value
 * trimmed, the first value of a name) without building the client's header map: only the relay's
 * values are cut out of the text. `body` is the body's bytes or its text without a byte order mark.
 */
export function eventFromHeaderText(s: string, body: Uint8Array | string): RecordedEvent | null {
  const f = noFields();
  let at = s.indexOf('\r\n');
  while (at !== -1) {
    const start = at + 2;
    at = s.indexOf('\r\n', start);
    const end = at === -1 ? s.length : at;
    const colon = s.indexOf(':', start);
    if (colon === -1 || colon >= end) continue;
    take(f, s.slice(start, colon), s.slice(colon + 1, end).trim());
  }
  return toEvent(f, body);
}
