/** What the route modules share: the store, the limits, the metrics, and the request's principal. */
import type { ConsumerTarget } from '../core/consumerTarget.js';
import type { EventStore } from '../core/eventStore.js';
import { CHECKS_APPENDS_FIRST, type ChecksAppendsFirst, type StoreLimits } from '../core/limits.js';
import type { LagHistory } from './lagHistory.js';
import type { ServerMetrics } from './metrics.js';
import type { Principal, Scope, TokenRegistry } from './tokens.js';

/** Server-side limits. Each can be changed through `ServerOptions.limits`. */
export interface ServerLimits extends StoreLimits {
  /** Largest HTTP request body in bytes (413 beyond). @default 8388608 (8 MiB) */
  maxBodyBytes: number;
  /** Largest WebSocket message from a client, in bytes. @default 1048576 (1 MiB) */
  maxMessageBytes: number;
  /** Most events one read request returns; larger `limit`s are clamped and paged with `next`. @default 1000 */
  maxReadLimit: number;
  /** Events one read request returns when it gives no `limit`. @default 100 */
  defaultReadLimit: number;
  /** Deepest nesting of arrays and objects accepted in a request body. @default 512 */
  maxJsonDepth: number;
  /** Most subscriptions (active or standby) on one WebSocket connection (429 / `rate_limited` beyond). @default 16 */
  maxSubscriptionsPerConnection: number;
  /**
   * Most TCP connections open at once, HTTP and WebSocket together; one more is answered
   * `503 unavailable` and closed. @default 1000
   */
  maxConnections: number;
  /**
   * Time to receive a whole request, headers and body (`408` beyond; headers alone get at most 60 s).
   * A connection idle in both directions for twice this long (at least 82 s, past the 72 s keep-alive)
   * is closed. WebSockets are exempt once upgraded (their heartbeat and `silenceMs` apply). @default 30000
   */
  requestTimeoutMs: number;
  /**
   * Bytes queued for one WebSocket client beyond the event frame each subscription has in flight
   * (replies, heartbeats) before the server closes the connection with code 1008. @default 8388608 (8 MiB)
   */
  maxSendBufferBytes: number;
}

/**
 * Whether the server must check each append against its own limits before handing it to `store`:
 * unless the store checks every append first (`CHECKS_APPENDS_FIRST`) against limits no looser than
 * the server's, in which case the store's check gives the same answer and the server's would only
 * run the same work twice.
 */
export function precheckAppends(store: EventStore, limits: StoreLimits): boolean {
  const own = (store as ChecksAppendsFirst)[CHECKS_APPENDS_FIRST];
  if (own === undefined || own === null) return true;
  return own.maxEventBytes > limits.maxEventBytes || own.maxAppendEvents > limits.maxAppendEvents;
}

export const DEFAULT_SERVER_LIMITS: ServerLimits = {
  maxEventBytes: 1024 * 1024,
  maxAppendEvents: 5000,
  maxBodyBytes: 8 * 1024 * 1024,
  maxMessageBytes: 1024 * 1024,
  maxReadLimit: 1000,
  defaultReadLimit: 100,
  maxSubscriptionsPerConnection: 16,
  maxJsonDepth: 512,
  maxConnections: 1000,
  requestTimeoutMs: 30_000,
  maxSendBufferBytes: 8 * 1024 * 1024,
};

export interface RouteContext {
  store: EventStore;
  limits: ServerLimits;
  /** Appends are checked against `limits` before the store sees them (see `precheckAppends`). */
  precheckAppends: boolean;
  metrics: ServerMetrics;
  tokens: TokenRegistry;
  lagHistory: LagHistory;
  /** The consumers' target whose effect outbox `/v1/effects` shows, when the server was given one. */
  effectsTarget: ConsumerTarget<unknown> | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth hook on every route that declares a scope. */
    principal: Principal;
  }
  interface FastifyContextConfig {
    /** The scope a route requires; routes without one (health, dashboard) are open. */
    scope?: Scope;
    /** A route without a scope that still needs a valid token when tokens are configured (any scope). */
    authenticate?: boolean;
  }
}
