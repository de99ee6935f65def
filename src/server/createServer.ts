/** Builds the fastify app (not listening): routes, auth, error mapping, WebSocket subscriptions. */
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import websocket from '@fastify/websocket';
import type { Registry } from 'prom-client';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyServerOptions } from 'fastify';
import { IdemError, InvalidInputError } from '../core/errors.js';
import type { EventStore } from '../core/eventStore.js';
import { requireScope } from './access.js';
import { DEFAULT_SERVER_LIMITS, type RouteContext, type ServerLimits } from './context.js';
import { clientErrorHandler, errorBody, statusForCode, toIdemError } from './httpErrors.js';
import { nestsDeeperThan } from './jsonDepth.js';
import { ServerMetrics } from './metrics.js';
import { registerConsumerRoutes } from './routes/consumerRoutes.js';
import { registerOpsRoutes } from './routes/opsRoutes.js';
import { registerStreamRoutes } from './routes/streamRoutes.js';
import type { MigrationStatus } from './storeHealth.js';
import { SubscriptionConnection } from './subscriptionConnection.js';
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
  /** A WebSocket silent this long is closed and its leases released. @default 10000 */
  silenceMs?: number;
  /**
   * More prom-client registries to include on /metrics, e.g. the one given to consumers running in this
   * process (`createConsumer({ metrics: { registry } })`): their repeat rate, gaps and reconnects.
   */
  metricsRegistries?: readonly Registry[];
  /** Reports whether the store's schema is current, for `/health`. @default the store's own `migrationStatus()` */
  migrationStatus?: () => MigrationStatus | Promise<MigrationStatus>;
}

export interface IdemServer {
  readonly app: FastifyInstance;
  readonly tokens: TokenRegistry;
  readonly metrics: ServerMetrics;
  /** Stops accepting, finishes queued acks, closes every subscription (releasing leases), then the store if `closeStore`. Safe to call twice. */
  close(): Promise<void>;
}

export async function createServer(options: ServerOptions): Promise<IdemServer> {
  const { store } = options;
  if (!store) throw new IdemError('invalid_input', 'store: is required', { field: 'store' });
  const storeLimits = (store as { limits?: Partial<ServerLimits> }).limits ?? {};
  const limits: ServerLimits = {
    ...DEFAULT_SERVER_LIMITS,
    ...pickStoreLimits(storeLimits),
    ...options.limits,
  };
  const tokens =
    options.tokens instanceof TokenRegistry ? options.tokens : new TokenRegistry(options.tokens ?? []);
  const metrics = new ServerMetrics(options.metricsRegistries ?? []);
  const ctx: RouteContext = { store, limits, metrics };
  const heartbeatMs = options.heartbeatMs ?? 3000;
  const silenceMs = options.silenceMs ?? 10_000;
  const connections = new Set<SubscriptionConnection>();
  let closing: Promise<void> | null = null;

  const app = Fastify({
    logger: options.logger ?? false,
    bodyLimit: limits.maxBodyBytes,
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

  app.setErrorHandler((err, req, reply) => {
    const e = toIdemError(err, limits.maxBodyBytes);
    if (!e) {
      req.log.error({ err }, 'request failed');
      const internal = new IdemError('internal', 'internal server error');
      return reply.code(500).send(errorBody(internal));
    }
    const status = statusForCode(e.code);
    if (req.headers.upgrade !== undefined) {
      // A refused WebSocket upgrade: answer on the raw socket and end it, since no HTTP parser owns it any more.
      refuseUpgrade(req.raw.socket, status, JSON.stringify(errorBody(e)));
      return reply.hijack();
    }
    return reply.code(status).send(errorBody(e));
  });
  app.setNotFoundHandler((req, reply) => {
    const e = new IdemError('not_found', `no route ${req.method} ${req.url.split('?')[0]}`, {
      what: 'route',
    });
    if (req.headers.upgrade !== undefined) {
      refuseUpgrade(req.raw.socket, 404, JSON.stringify(errorBody(e)));
      return reply.hijack();
    }
    return reply.code(404).send(errorBody(e));
  });

  // Authentication runs before the body is read, so an unauthorised caller cannot make the server parse anything.
  app.addHook('onRequest', async (req) => {
    if (closing) throw new IdemError('unavailable', 'server is shutting down');
    const scope = req.routeOptions.config.scope;
    if (scope === undefined) {
      req.principal = ANONYMOUS;
      return;
    }
    req.principal = tokens.authenticate(req.headers.authorization);
    requireScope(req.principal, scope);
  });
  app.addHook('preHandler', async (req) => {
    if (req.body !== undefined && nestsDeeperThan(req.body, limits.maxJsonDepth)) {
      throw new InvalidInputError(
        'body',
        `must not nest arrays and objects deeper than ${limits.maxJsonDepth} levels`,
      );
    }
  });
  app.addHook('onResponse', async (req, reply) => {
    metrics.httpRequests.inc({ route: req.routeOptions.url ?? 'unknown', status: String(reply.statusCode) });
  });

  await app.register(websocket, {
    options: { maxPayload: limits.maxMessageBytes },
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

  registerStreamRoutes(app, ctx);
  registerConsumerRoutes(app, ctx);
  registerOpsRoutes(app, ctx, options.migrationStatus);

  return {
    app,
    tokens,
    metrics,
    close() {
      closing ??= (async () => {
        await Promise.all([...connections].map((c) => c.shutdown()));
        await app.close();
        if (options.closeStore) await store.close();
      })();
      return closing;
    },
  };
}

function refuseUpgrade(socket: Socket, status: number, body: string): void {
  if (socket.destroyed) return;
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\n` +
      'content-type: application/json; charset=utf-8\r\n' +
      `content-length: ${Buffer.byteLength(body)}\r\n` +
      'connection: close\r\n\r\n' +
      body,
  );
  socket.destroySoon();
}

function pickStoreLimits(l: Partial<ServerLimits>): Partial<ServerLimits> {
  const out: Partial<ServerLimits> = {};
  if (typeof l.maxEventBytes === 'number') out.maxEventBytes = l.maxEventBytes;
  if (typeof l.maxAppendEvents === 'number') out.maxAppendEvents = l.maxAppendEvents;
  return out;
}
