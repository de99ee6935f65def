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
  const position = Number(h?.get(RELAY_HEADERS.position) ?? '');
  const id = h?.get(RELAY_HEADERS.id) ?? '';
  if (!h || !Number.isSafeInteger(position) || position < 1 || id === '') return null;
  return {
    id,
    stream: h.get(RELAY_HEADERS.stream),
    version: Number(h.get(RELAY_HEADERS.version)),
    position,
    type: h.get(RELAY_HEADERS.type),
    data: JSON.parse(decoder.decode(body)) as JsonValue,
    metadata: JSON.parse(h.get(RELAY_HEADERS.metadata) || '{}') as JsonObject,
    recordedAt: h.get(RELAY_HEADERS.recordedAt),
  };
}
