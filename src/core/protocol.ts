/**
 * The WebSocket subscription protocol (`/v1/subscribe`): one JSON object per text frame.
 * docs/protocol.md is the prose version of these types; keep both in step.
 */
import type { ConsumerMonitors } from './consumerMonitors.js';
import type { ErrorCode } from './errors.js';
import type { RecordedEvent } from './event.js';
import type { EventFilter } from './filter.js';
import type { ConsumerPause, FailureInfo, ParkInfo, StartFrom } from './subscription.js';

/**
 * A request id chosen by the client; the server echoes it in the `ok` or `error` reply. Required on
 * every request so answered (all but `more` and `ping`).
 */
export type RequestId = string | number;

export interface WireError {
  code: ErrorCode;
  message: string;
  details: Record<string, unknown>;
}

// ---- client -> server ----

export interface SubscribeRequest {
  type: 'subscribe';
  /** The client's name for this subscription on this connection (1-64 characters); every later message about it carries it. */
  sub: string;
  consumer: string;
  /** With `partition: { count, index }`: one partition of the consumer group `consumer` (its own cursor, lease, epoch). */
  filter?: EventFilter;
  from?: StartFrom;
  standby?: boolean;
  maxInFlight?: number;
  batchSize?: number;
  leaseTtlMs?: number;
  owner?: string;
  /**
   * Pull mode: how many messages (`events` or `caught_up`) the server may send before the client asks
   * for more with `more`. Omitted: no message limit (delivery is still bounded by `maxInFlight`).
   */
  credit?: number;
  req: RequestId;
}

/** Pull mode: allows the server to send `messages` more messages for the subscription. */
export interface MoreRequest {
  type: 'more';
  sub: string;
  messages: number;
}

export interface AckRequest {
  type: 'ack';
  sub: string;
  position: number;
  req: RequestId;
}

export interface ParkRequest {
  type: 'park';
  sub: string;
  position: number;
  info: ParkInfo;
  req: RequestId;
}

export interface FailRequest {
  type: 'fail';
  sub: string;
  info: FailureInfo;
  req: RequestId;
}

/** The owner holds back because of an outage (`active: true`), or no longer. Answered by `ok`. */
export interface OutageRequest {
  type: 'outage';
  sub: string;
  active: boolean;
  req: RequestId;
}

export interface UnsubscribeRequest {
  type: 'unsubscribe';
  sub: string;
  req: RequestId;
}

export interface PingRequest {
  type: 'ping';
  req?: RequestId;
}

/**
 * The consumer's handler-side monitors, counted by its process (cumulative since it started), for the
 * server's `/metrics`. No reply; the server keeps at most one report per subscription per
 * `REPORT_INTERVAL_MS` and drops the ones that come sooner.
 */
export interface ReportRequest {
  type: 'report';
  sub: string;
  monitors: ConsumerMonitors;
}

/** The shortest interval between two reports of one subscription that the server keeps. */
export const REPORT_INTERVAL_MS = 1000;

export type ClientMessage =
  | SubscribeRequest
  | MoreRequest
  | AckRequest
  | ParkRequest
  | FailRequest
  | OutageRequest
  | UnsubscribeRequest
  | PingRequest
  | ReportRequest;

// ---- server -> client ----

export interface HelloMessage {
  type: 'hello';
  protocol: 1;
  /** The server sends a heartbeat this often; a client may treat a longer silence (say 3x) as a dead connection. */
  heartbeatMs: number;
  /** A connection from which no frame (message, ping or pong) arrives for this long is closed then, releasing its leases. */
  silenceMs: number;
  maxSubscriptions: number;
}

export interface SubscribedMessage {
  type: 'subscribed';
  sub: string;
  consumer: string;
  epoch: number;
  /** The consumer's acknowledged position when this subscription took ownership. */
  position: number;
  req: RequestId;
}

export interface EventsMessage {
  type: 'events';
  sub: string;
  /** In position order. */
  events: RecordedEvent[];
  /** True for dead letters delivered again by a retry. */
  redelivery: boolean;
}

export interface CaughtUpMessage {
  type: 'caught_up';
  sub: string;
  position: number;
}

/**
 * The consumer was paused by an operator (`pause` set): no events follow until it is resumed
 * (`pause: null`). Acks and parks of what was delivered before still work.
 */
export interface PausedMessage {
  type: 'paused';
  sub: string;
  pause: ConsumerPause | null;
}

/** The success reply to a request; `sub` when the request named one. */
export interface OkMessage {
  type: 'ok';
  req: RequestId;
  sub?: string;
  /** The reply to a `park`: see `ParkResult.parkedThrough`. */
  parkedThrough?: number;
}

/**
 * With `req`: the reply to that request (and `sub` when the request named one). With `sub` and no
 * `req`: the subscription ended with this error (`closed` follows). With neither: a frame the server
 * could not read as a request, which changed nothing.
 */
export interface ErrorMessage {
  type: 'error';
  req?: RequestId;
  sub?: string;
  error: WireError;
}

export interface ClosedMessage {
  type: 'closed';
  sub: string;
  /** `unsubscribed`, `failed`, `fenced`, `shutdown`, or another error code. */
  reason: string;
}

export interface HeartbeatMessage {
  type: 'heartbeat';
  time: string;
}

export interface PongMessage {
  type: 'pong';
  req?: RequestId;
}

export type ServerMessage =
  | HelloMessage
  | SubscribedMessage
  | EventsMessage
  | CaughtUpMessage
  | PausedMessage
  | OkMessage
  | ErrorMessage
  | ClosedMessage
  | HeartbeatMessage
  | PongMessage;

export const PROTOCOL_VERSION = 1;
