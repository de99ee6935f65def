import type { Command } from 'commander';
import { InvalidInputError, isIdemError } from '../core/errors.js';
import type { EventStore } from '../core/eventStore.js';
import type { CliContext } from './context.js';
import { startHealthOnlyServer } from './healthOnlyServer.js';
import { creatingStore, describeTarget, openStore, storeTarget, type StoreFlags } from './openStore.js';
import { Output } from './output.js';
import { collect, parseInteger } from './parse.js';
import { withTarget, withTargetOptions, type TargetFlags } from './targetFlags.js';
import { UsageError } from './usageError.js';

interface ServeFlags extends StoreFlags, TargetFlags {
  host: string;
  port: string;
  tokens?: string;
  logLevel?: string;
  allowOrigin?: string[];
  maxConnections?: string;
  requestTimeout?: string;
}

/** What `startServer` in src/server returns. */
export interface RunningServer {
  url: string;
  close(): Promise<void>;
}

interface ServerModule {
  startServer(options: {
    store: EventStore;
    host: string;
    port: number;
    tokens?: unknown;
    logger?: unknown;
    allowedOrigins?: string[];
    limits?: { maxConnections?: number; requestTimeoutMs?: number };
    effectsTarget?: unknown;
  }): Promise<RunningServer>;
  loadTokens?: (options: { file?: string; env?: NodeJS.ProcessEnv }) => unknown[];
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'];

// A variable, so the CLI builds and runs in a build without src/server.
const SERVER_MODULE: string = '../server/index.js';

const HELP = `
Starts the idem server (HTTP + WebSocket API, /metrics, /health, dashboard) over the embedded store
(default ./data/idem.db) or PostgreSQL, until Ctrl-C or SIGTERM, then shuts down gracefully.
Binding to a non-loopback address requires tokens (--tokens FILE or env IDEM_TOKENS).
Without tokens, requests whose Host or Origin is not loopback are refused (403), so web pages
cannot reach the server; with tokens, browser pages from other origins need --allow-origin.
A request must arrive within --request-timeout (408 beyond); at most --max-connections HTTP and
WebSocket connections are open at once (503 beyond). See docs/protocol.md for every limit.

Examples:
  $ idem serve
  $ idem serve --db /var/lib/idem/idem.db --port 8080
  $ idem serve --postgres postgres://postgres@127.0.0.1/idem --host 0.0.0.0 --tokens tokens.json
  $ idem serve --tokens tokens.json --allow-origin https://dash.example.com --max-connections 200
  $ idem serve --target-db ./data/target.db      # the dashboard's Effects page shows this outbox

The dashboard at / lists consumers with their lag (and its last hour), dead letters with Retry and
Skip, pause and resume, a stream browser and the effect outbox; see docs/dashboard.md.`;

export function registerServe(program: Command, ctx: CliContext): void {
  withTargetOptions(program.command('serve'))
    .description('run the idem server')
    .option('--db <path>', 'embedded SQLite store file, created if missing (default: ./data/idem.db)')
    .option('--postgres <url>', 'PostgreSQL store connection string (or env IDEM_POSTGRES_URL)')
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--port <port>', 'port to listen on (0 = any free port)', '4680')
    .option('--tokens <file>', 'API tokens file (JSON or name=secret:scopes lines); also env IDEM_TOKENS')
    .option(
      '--log-level <level>',
      'request logging as JSON lines on stdout: info, warn, error, debug (default: off)',
    )
    .option(
      '--allow-origin <origin>',
      'a web origin (https://host[:port]) allowed to call the server from a browser, with CORS; repeatable',
      collect,
    )
    .option('--max-connections <n>', 'most HTTP and WebSocket connections open at once (default: 1000)')
    .option('--request-timeout <ms>', 'time to receive a whole request, headers and body (default: 30000)')
    .option('--json', 'print where it listens as JSON')
    .addHelpText('after', HELP)
    .action(async (flags: ServeFlags) => {
      const out = new Output(ctx.io, flags.json === true);
      const port = parseInteger(flags.port, '--port', 0) ?? 4680;
      if (port > 65535) throw new UsageError('--port must be at most 65535');
      const target = storeTarget(flags, ctx.env);
      if (target.kind === 'remote') throw new UsageError('serve runs over --db or --postgres, not --url');
      const signal = ctx.stopSignal();
      const store = await openStore(target, creatingStore(ctx.io));
      // Runs the server until the stop signal; the effects target, when given, stays open as long.
      const serve = async (effectsTarget: unknown): Promise<void> => {
        const server = await start(store, flags, port, ctx, out, effectsTarget);
        out.data({ url: server.url, store: describeTarget(target) });
        out.line(`idem: listening on ${server.url} (store: ${describeTarget(target)}); Ctrl-C to stop`);
        if (!signal.aborted)
          await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        out.note('idem: shutting down');
        await server.close();
      };
      try {
        if (flags.targetDb === undefined && flags.targetPostgres === undefined) await serve(undefined);
        else await withTarget(flags, ctx.env, serve);
      } finally {
        await store.close();
      }
      out.note('idem: stopped');
    });
}

async function start(
  store: EventStore,
  flags: ServeFlags,
  port: number,
  ctx: CliContext,
  out: Output,
  effectsTarget: unknown,
): Promise<RunningServer> {
  let mod: ServerModule;
  try {
    mod = (await import(SERVER_MODULE)) as ServerModule;
    if (typeof mod.startServer !== 'function')
      throw Object.assign(new Error('no startServer'), { code: 'ERR_MODULE_NOT_FOUND' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    if (flags.tokens !== undefined)
      throw new UsageError('--tokens needs the full server, which this build does not have');
    out.note(
      'idem: the full server (HTTP API, WebSocket subscriptions, dashboard) is not built yet; ' +
        'serving only GET /health over the store',
    );
    return startHealthOnlyServer(store, flags.host, port);
  }
  const options: Parameters<ServerModule['startServer']>[0] = { store, host: flags.host, port };
  if (effectsTarget !== undefined) options.effectsTarget = effectsTarget;
  if (flags.allowOrigin !== undefined) options.allowedOrigins = flags.allowOrigin;
  const maxConnections = parseInteger(flags.maxConnections, '--max-connections', 1);
  const requestTimeoutMs = parseInteger(flags.requestTimeout, '--request-timeout', 1);
  if (maxConnections !== undefined || requestTimeoutMs !== undefined) {
    options.limits = {
      ...(maxConnections === undefined ? {} : { maxConnections }),
      ...(requestTimeoutMs === undefined ? {} : { requestTimeoutMs }),
    };
  }
  if (flags.logLevel !== undefined) {
    if (!LOG_LEVELS.includes(flags.logLevel))
      throw new InvalidInputError('--log-level', `must be one of ${LOG_LEVELS.join(', ')}`);
    options.logger = { level: flags.logLevel };
  }
  if (mod.loadTokens) {
    const tokens = mod.loadTokens({
      ...(flags.tokens === undefined ? {} : { file: flags.tokens }),
      env: ctx.env,
    });
    if (tokens.length > 0) options.tokens = tokens;
  } else if (flags.tokens !== undefined) {
    throw new UsageError('--tokens is not supported by this build of the server');
  }
  try {
    return await mod.startServer(options);
  } catch (err) {
    if (isIdemError(err)) throw err;
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'EADDRINUSE')
      throw new UsageError(`${flags.host}:${port} is already in use; choose another --port`);
    throw err;
  }
}
