/**
 * The append WebSocket (`/v1/appends/ws`): the appends of `POST /v1/appends` as frames on a socket
 * the client keeps, one JSON object per text frame. docs/protocol.md is the prose version of these
 * types; keep both in step.
 */
import type { AppendResult } from './event.js';
import type { ExpectedVersion } from './expectedVersion.js';
import type { RequestId, WireError } from './protocol.js';

/** The path of the append WebSocket. */
export const APPEND_SOCKET_PATH = '/v1/appends/ws';

/** Frames a connection reads ahead of its replies: past this many unanswered frames the server stops reading it. */
export const APPEND_FRAMES_AHEAD = 8;

/** One append: the body of `POST /v1/streams/:stream/events` plus its stream. */
export interface AppendEntry {
  stream: string;
  events: unknown[];
  expectedVersion?: ExpectedVersion;
}

// ---- client -> server ----

/** Appends to write, each on its own (as `POST /v1/appends`); answered by `results` or `error` with its `req`. */
export interface AppendsFrame {
  type: 'appends';
  req: RequestId;
  appends: AppendEntry[];
}

// ---- server -> client ----

/** Sent once when the socket opens: the bounds a frame must keep. */
export interface AppendHello {
  type: 'hello';
  protocol: 1;
  /** Most appends in one frame. */
  maxAppends: number;
  /** Largest frame from the client, in bytes (the server's body limit). */
  maxMessageBytes: number;
  /** Frames the server reads ahead of its replies. */
  framesAhead: number;
}

/** One outcome per append, in the frame's order: its result, or the error the single route would answer. */
export interface AppendResults {
  type: 'results';
  req: RequestId;
  results: (AppendResult | { error: WireError })[];
}

/** The frame as a whole was refused (not such a list, or the server is shutting down): nothing was written. */
export interface AppendFrameError {
  type: 'error';
  req: RequestId;
  error: WireError;
}

export type AppendServerMessage = AppendHello | AppendResults | AppendFrameError;

/** Close codes of the append WebSocket besides the usual 1000 and 1001. */
export const APPEND_CLOSE = {
  /** A frame without a usable `req`: not a JSON object, or binary. The reason names the problem. */
  malformed: 1008,
  /** A frame larger than `maxMessageBytes`. */
  tooLarge: 1009,
} as const;
