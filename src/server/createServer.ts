/** Builds the fastify app (not listening): routes, auth, error mapping, WebSocket subscriptions. */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import websocket from '@fastify/websocket';
import type { Registry } from 'prom-client';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyServerOptions } from 'fastify';
import { IdemError, InvalidInputError } from '../core/errors.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';
import type { ConsumerTarget } from '../core/consumerTarget.js';
import type { EventStore } from '../core/eventStore.js';
import { errorFor, requireScope } from './access.js';
import { DEFAULT_SERVER_LIMITS, precheckAppends, type RouteContext, type ServerLimits } from './context.js';
import { clientErrorHandler, errorBody, rawErrorResponse, statusForCode, toIdemError } from './httpErrors.js';
import { nestsDeeperThan } from './jsonDepth.js';
import { OriginPolicy } from './origins.js';
import { ServerMetrics } from './metrics.js';
import { LagHistory } from './lagHistory.js';
import { registerConsoleRoutes } from './routes/consoleRoutes.js';
import { registerConsumerRoutes } from './routes/consumerRoutes.js';
import { registerOpsRoutes } from './routes/opsRoutes.js';
import { registerStreamRoutes } from './routes/streamRoutes.js';
import type { MigrationStatus } from './storeHealth.js';
import { SubscriptionConnection } from './subscriptionConnection.js';
import { AppendConnection } from './appendConnection.js';
import { APPEND_SOCKET_PATH } from '../core/appendProtocol.js';
import { ANONYMOUS, TokenRegistry, type TokenConfig } from './tokens.js';

export interface ServerOptions {
  store: EventStore;
  /** API tokens; with none, every caller has every scope (and `startServer` binds only to loopback). */
  tokens?: readonly TokenConfig[] | TokenRegistry;
  limits?: Partial<ServerLimits>;
  /** A fastify logger setting (pino options or `true`). @default false (silent) */
  logger?: FastifyServerOptions['logger'];
  /** Close the store when the server closes. @default false */
  closeStore?: boolean;
  /** How often the server sends a heartbeat (and a ping) on each WebSocket. @default 3000 */
  heartbeatMs?: number;
  /**
   * A WebSocket from which no frame (message, ping or pong) arrives for this long is closed then, and
   * its leases released. Keep it several `heartbeatMs`: clients keep their connection by answering
   * the pings sent every `heartbeatMs`. @default 10000
   */
  silenceMs?: number;
  /**
   * More prom-client registries to include on /metrics, e.g. the one given to consumers running in this
   * process (`createConsumer({ metrics: { registry } })`): their repeat rate, gaps and reconnects.
   */
  metricsRegistries?: readonly Registry[];
  /** Reports whether the store's schema is current, for `/health`. @default the store's own `migrationStatus()` */
  migrationStatus?: () => MigrationStatus | Promise<MigrationStatus>;
  /**
   * Web origins (`https://dash.example.com`) allowed to call the server from a browser, with CORS
   * headers. Other requests carrying an `Origin` are refused (403) unless it is the server's own, or,
   * without tokens, a loopback one. @default []
   */
  allowedOrigins?: readonly string[];
  /**
   * How often the server samples every consumer's lag for the dashboard's one-hour chart, in ms
   * (100 to 600000). The samples live in memory. @default 15000
   */
  lagSampleMs?: number;
  /**
   * The consumers' target (`sqliteTarget`, `postgresTarget`) whose effect outbox `/v1/effects` and
   * the dashboard show. Without it those answer `not_found`. The server does not close it.
   */
  effectsTarget?: ConsumerTarget<unknown>;
}

export const SERVER_OPTION_KEYS = {
  store: true,
  tokens: true,
  limits: true,
  logger: true,
  closeStore: true,
  heartbeatMs: true,
  silenceMs: true,
  metricsRegistries: true,
  migrationStatus: true,
  allowedOrigins: true,
  lagSampleMs: true,
  effectsTarget: true,
} as const satisfies KnownKeys<ServerOptions>;

export interface IdemServer {
  readonly app: FastifyInstance;
  readonly tokens: TokenRegistry;
  readonly metrics: ServerMetrics;
  /** Stops accepting, finishes queued acks, closes every subscription (releasing leases), then the store if `closeStore`. Safe to call twice. */
  close(): Promise<void>;
}

export async function createServer(options: ServerOptions): Promise<IdemServer> {
  if (options === undefined) throw new InvalidInputError('options', 'must be an object');
  checkKnownKeys(options, SERVER_OPTION_KEYS, '');
  // The defaults name every limit.
  checkKnownKeys(options.limits, DEFAULT_SERVER_LIMITS, 'limits');
  const { store } = options;
  if (!store) throw new IdemError('invalid_input', 'store: is required', { field: 'store' });
  const storeLimits = (store as { limits?: Partial<ServerLimits> }).limits ?? {};
  const limits: ServerLimits = {
    ...DEFAULT_SERVER_LIMITS,
    ...pickStoreLimits(storeLimits),
    ...options.limits,
  };
  // Timers above about 24.8 days overflow to 1 ms in Node, so the timeout's bound matters.
  for (const [key, max] of [
    ['maxConnections', 1_000_000],
    ['requestTimeoutMs', 3_600_000],
    ['maxSendBufferBytes', 1024 ** 3],
  ] as const) {
    if (!Number.isSafeInteger(limits[key]) || limits[key] < 1 || limits[key] > max)
      throw new InvalidInputError(`limits.${key}`, `must be an integer from 1 to ${max}`);
  }
  const tokens =
    options.tokens instanceof TokenRegistry ? options.tokens : new TokenRegistry(options.tokens ?? []);
  const origins = new OriginPolicy(tokens.enabled, options.allowedOrigins);
  const metrics = new ServerMetrics(options.metricsRegistries ?? []);
  const lagSampleMs = options.lagSampleMs ?? 15_000;
  if (!Number.isSafeInteger(lagSampleMs) || lagSampleMs < 100 || lagSampleMs > 600_000)
    throw new InvalidInputError('lagSampleMs', 'must be an integer from 100 to 600000');
  // Called only once the app below exists (sampling starts after the routes are registered).
  const lagHistory = new LagHistory(store, lagSampleMs, (err) => app.log.warn({ err }, 'lag sample failed'));
  const ctx: RouteContext = {
    store,
    limits,
    precheckAppends: precheckAppends(store, limits),
    metrics,
    tokens,
    lagHistory,
    effectsTarget: options.effectsTarget ?? null,
  };
  const heartbeatMs = options.heartbeatMs ?? 3000;
  const silenceMs = options.silenceMs ?? 10_000;
  const connections = new Set<SubscriptionConnection>();
  const appendConnections = new Set<AppendConnection>();
  let closing: Promise<void> | null = null;

  const app = Fastify({
    logger: options.logger ?? false,
    bodyLimit: limits.maxBodyBytes,
    // A body sent slowly (or never finished) holds its connection only this long, authenticated or not.
    requestTimeout: limits.requestTimeoutMs,
    // An idle socket (say, a reply the client stopped reading) is dropped; never before an idle
    // keep-alive connection would be, or a client reusing one would meet a reset.
    keepAliveTimeout: KEEP_ALIVE_MS,
    connectionTimeout: Math.max(2 * limits.requestTimeoutMs, KEEP_ALIVE_MS + 10_000),
    http: {
      headersTimeout: Math.min(60_000, limits.requestTimeoutMs),
      // Node checks the two timeouts above on this interval (30 s by default, too coarse for short timeouts).
      connectionsCheckingInterval: Math.max(10, Math.min(5_000, Math.floor(limits.requestTimeoutMs / 2))),
    },
    clientErrorHandler,
    // Router-level refusals (a malformed percent-encoding, an over-long path segment) get the usual error body.
    frameworkErrors: (err, _req, reply) => {
      const e =
        err.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? new IdemError('too_large', 'url: a path segment is longer than the server accepts', {
              field: 'url',
            })
          : new InvalidInputError('url', 'is not a well-formed URL path');
      void (reply as FastifyReply).code(e.code === 'too_large' ? 414 : 400).send(errorBody(e));
    },
    // Stream names may be 200 characters, up to 12 bytes each once percent-encoded.
    routerOptions: { maxParamLength: 4096 },
    // Event data is opaque JSON: a "__proto__" or "constructor" key is kept as a plain key (JSON.parse
    // makes it an own property) and round-trips like in the embedded store. Nothing here merges it into objects.
    onProtoPoisoning: 'ignore',
    onConstructorPoisoning: 'ignore',
  });
  app.decorateRequest('principal', null as never);
  limitConnections(app.server, limits.maxConnections);

  app.setErrorHandler((err, req, reply) => {
    const raw = toIdemError(err, limits.maxBodyBytes);
    const e = raw && errorFor(req.principal, raw);
    if (!e) {
      req.log.error({ err }, 'request failed');
      const internal = new IdemError('internal', 'internal server error');
      return reply.code(500).send(errorBody(internal));
    }
    const status = statusForCode(e.code);
    if (req.headers.upgrade !== undefined) {
      // A refused WebSocket upgrade: answer on the raw socket and end it, since no HTTP parser owns it any more.
      refuseUpgrade(req.raw.socket, status, e);
      return reply.hijack();
    }
    return reply.code(status).send(errorBody(e));
  });
  app.setNotFoundHandler((req, reply) => {
    const e = new IdemError('not_found', `no route ${req.method} ${req.url.split('?')[0]}`, {
      what: 'route',
    });
    if (req.headers.upgrade !== undefined) {
      refuseUpgrade(req.raw.socket, 404, e);
      return reply.hijack();
    }
    return reply.code(404).send(errorBody(e));
  });

  // Authentication runs before the body is read, so an unauthorised caller cannot make the server parse anything.
  app.addHook('onRequest', async (req, reply) => {
    if (closing) throw new IdemError('unavailable', 'server is shutting down');
    const origin = req.headers.origin;
    origins.check(req.headers.host, origin);
    if (origins.listed(origin)) {
      void reply.header('access-control-allow-origin', origin).header('vary', 'origin');
      if (req.method === 'OPTIONS') {
        // A CORS preflight: it carries no token, and says which method and headers may follow.
        return reply
          .code(204)
          .header('access-control-allow-methods', 'GET, POST, DELETE')
          .header('access-control-allow-headers', 'authorization, content-type')
          .header('access-control-max-age', '600')
          .send();
      }
    }
    const { scope, authenticate } = req.routeOptions.config;
    if (scope === undefined) {
      req.principal = authenticate ? tokens.authenticate(req.headers.authorization) : ANONYMOUS;
      return;
    }
    req.principal = tokens.authenticate(req.headers.authorization);
    requireScope(req.principal, scope);
  });
  // The hooks below do no I/O, so they take fastify's callback form: an `async` hook costs every
  // request a promise and a turn of the microtask queue.
  app.addHook('preHandler', (req, _reply, done) => {
    if (req.body !== undefined && nestsDeeperThan(req.body, limits.maxJsonDepth)) {
      done(
        new InvalidInputError(
          'body',
          `must not nest arrays and objects deeper than ${limits.maxJsonDepth} levels`,
        ),
      );
      return;
    }
    done();
  });
  // A refused caller, or one answered before its body was read, loses the connection: Node would
  // otherwise keep reading (and discarding) the rest of a body the client may send as slowly as it likes.
  app.addHook('onSend', (req, reply, payload, done) => {
    if (CLOSE_AFTER.has(reply.statusCode) || !req.raw.complete) void reply.header('connection', 'close');
    done(null, payload);
  });
  app.addHook('onResponse', (req, reply, done) => {
    metrics.httpRequests.inc({ route: req.routeOptions.url ?? 'unknown', status: String(reply.statusCode) });
    done();
  });

  await app.register(websocket, {
    // The larger of the two sockets' bounds; each connection applies its own.
    options: { maxPayload: Math.max(limits.maxMessageBytes, limits.maxBodyBytes) },
    errorHandler: (_err, socket) => socket.terminate(),
  });

  app.route({
    method: 'GET',
    url: '/v1/subscribe',
    config: { scope: 'subscribe' },
    handler: async (_req, reply) =>
      reply.code(400).send(
        errorBody(
          new IdemError('invalid_input', 'upgrade: /v1/subscribe needs a WebSocket upgrade', {
            field: 'upgrade',
          }),
        ),
      ),
    wsHandler: (socket, req) => {
      const conn = new SubscriptionConnection(
        socket,
        req.principal,
        {
          store,
          metrics,
          maxSubscriptions: limits.maxSubscriptionsPerConnection,
          maxMessageBytes: limits.maxMessageBytes,
          maxSendBufferBytes: limits.maxSendBufferBytes,
          heartbeatMs,
          silenceMs,
          logError: (err, msg) => req.log.error({ err }, msg),
        },
        `${req.ip}:${req.socket.remotePort ?? 0}`,
      );
      connections.add(conn);
      void conn.done.then(() => connections.delete(conn));
    },
  });

  app.route({
    method: 'GET',
    url: APPEND_SOCKET_PATH,
    config: { scope: 'append' },
    handler: async (_req, reply) =>
      reply.code(400).send(
        errorBody(
          new IdemError('invalid_input', `upgrade: ${APPEND_SOCKET_PATH} needs a WebSocket upgrade`, {
            field: 'upgrade',
          }),
        ),
      ),
    wsHandler: (socket, req) => {
      const conn = new AppendConnection(socket, req.principal, {
        store,
        limits,
        precheckAppends: ctx.precheckAppends,
        metrics,
        heartbeatMs,
        silenceMs,
        logError: (err, msg) => req.log.error({ err }, msg),
      });
      appendConnections.add(conn);
      void conn.done.then(() => appendConnections.delete(conn));
    },
  });

  registerStreamRoutes(app, ctx);
  registerConsumerRoutes(app, ctx);
  registerOpsRoutes(app, ctx, options.migrationStatus);
  registerConsoleRoutes(app, ctx);
  lagHistory.start();

  return {
    app,
    tokens,
    metrics,
    close() {
      closing ??= (async () => {
        await Promise.all([
          ...[...connections].map((c) => c.shutdown()),
          ...[...appendConnections].map((c) => c.shutdown()),
        ]);
        await lagHistory.stop();
        await app.close();
        if (options.closeStore) await store.close();
      })();
      return closing;
    },
  };
}

function refuseUpgrade(socket: Socket, status: number, e: IdemError): void {
  if (socket.destroyed) return;
  socket.end(rawErrorResponse(status, e));
  socket.destroySoon();
}

/** How long an idle keep-alive connection stays open (fastify's default, kept explicit for the idle timeout). */
const KEEP_ALIVE_MS = 72_000;

/** Statuses after which the connection is closed (`connection: close`). */
const CLOSE_AFTER: ReadonlySet<number> = new Set([401, 403, 408, 413]);

/**
 * Caps the open TCP connections (HTTP and WebSocket alike): one more is answered `503` with the usual
 * error body and closed before any of its requests is read. The listener runs before Node's own, so
 * a refused connection never reaches the router.
 */
function limitConnections(server: Server, max: number): void {
  let open = 0;
  server.prependListener('connection', (socket: Socket) => {
    if (open >= max) {
      const e = new IdemError(
        'unavailable',
        `too many connections: the server accepts at most ${max} at once (limits.maxConnections, ` +
          'idem serve --max-connections); try again later',
        { limit: max },
      );
      socket.write(rawErrorResponse(503, e, 'retry-after: 1\r\n'));
      socket.destroy();
      return;
    }
    open++;
    socket.once('close', () => open--);
  });
}

function pickStoreLimits(l: Partial<ServerLimits>): Partial<ServerLimits> {
  const out: Partial<ServerLimits> = {};
  if (typeof l.maxEventBytes === 'number') out.maxEventBytes = l.maxEventBytes;
  if (typeof l.maxAppendEvents === 'number') out.maxAppendEvents = l.maxAppendEvents;
  return out;
}
