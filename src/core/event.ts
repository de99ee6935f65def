import type { JsonObject, JsonValue } from './json.js';

/** Well-known metadata keys; any other JSON-valued key may be added. */
export type EventMetadata = JsonObject;

/** An event as a caller hands it to `append`. */
export interface NewEvent {
  /** A UUID chosen by the caller (any version), or omitted for a generated UUIDv7. Makes appends idempotent. */
  id?: string;
  /** The event type, e.g. `invoice.issued`. 1-256 characters. */
  type: string;
  /** JSON payload. */
  data: JsonValue;
  /** JSON object; may carry `commandId`, `correlationId`, `causationId`. @default {} */
  metadata?: JsonObject;
}

/** An event as the store recorded it. */
export interface RecordedEvent {
  id: string;
  /** The stream (entity) it belongs to, e.g. `invoice-42`. */
  stream: string;
  type: string;
  /** 1-based, contiguous version within the stream. */
  version: number;
  /** 1-based global commit order of the store. */
  position: number;
  data: JsonValue;
  metadata: JsonObject;
  /** ISO-8601 UTC timestamp of the commit, with milliseconds. */
  recordedAt: string;
}

/** What `append` returns. For a duplicate append it is the original append's result. */
export interface AppendResult {
  stream: string;
  /** The stream's version after the append (the version of its last event). */
  version: number;
  firstPosition: number;
  lastPosition: number;
  /** True when every event was already in the stream with the same content, and nothing was written. */
  duplicate: boolean;
  /** The ids of the appended events, in order (generated ones included). */
  ids: string[];
}

/** The category of a stream: the part before the first `-` (the whole name when there is none). */
export function streamCategory(stream: string): string {
  const i = stream.indexOf('-');
  return i < 0 ? stream : stream.slice(0, i);
}
