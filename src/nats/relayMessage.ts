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

/** The idem event carried by a relayed message, or null when the message was not published by a relay. */
export function eventFromMessage(h: MsgHdrs | undefined, body: Uint8Array): RecordedEvent | null {
  if (!h) return null;
  // One pass over the headers: `get` scans every key for each name asked.
  let id = '';
  let stream = '';
  let version = '';
  let position = '';
  let type = '';
  let recordedAt = '';
  let metadata = '';
  for (const [key, values] of h) {
    const v = values[0] ?? '';
    switch (key) {
      case RELAY_HEADERS.id:
        id = v;
        break;
      case RELAY_HEADERS.stream:
        stream = v;
        break;
      case RELAY_HEADERS.version:
        version = v;
        break;
      case RELAY_HEADERS.position:
        position = v;
        break;
      case RELAY_HEADERS.type:
        type = v;
        break;
      case RELAY_HEADERS.recordedAt:
        recordedAt = v;
        break;
      case RELAY_HEADERS.metadata:
        metadata = v;
        break;
    }
  }
  const at = Number(position);
  if (position === '' || !Number.isSafeInteger(at) || at < 1 || id === '') return null;
  return {
    id,
    stream,
    version: Number(version),
    position: at,
    type,
    data: JSON.parse(decoder.decode(body)) as JsonValue,
    metadata: JSON.parse(metadata || '{}') as JsonObject,
    recordedAt,
  };
}
