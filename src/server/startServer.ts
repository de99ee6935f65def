/** Starts the server on a TCP port. Refuses a non-loopback address unless tokens are configured. */
import { isIP } from 'node:net';
import { IdemError, InvalidInputError } from '../core/errors.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';
import { createServer, SERVER_OPTION_KEYS, type IdemServer, type ServerOptions } from './createServer.js';
import { isLoopback } from './origins.js';

export { isLoopback };

export interface StartServerOptions extends ServerOptions {
  /** @default '127.0.0.1' */
  host?: string;
  /** `0` picks a free port. @default 4680 */
  port?: number;
}

const START_SERVER_OPTION_KEYS = {
  ...SERVER_OPTION_KEYS,
  host: true,
  port: true,
} as const satisfies KnownKeys<StartServerOptions>;

export interface RunningServer extends IdemServer {
  /** The base URL, e.g. `http://127.0.0.1:4680`. */
  readonly url: string;
  readonly port: number;
}

export async function startServer(options: StartServerOptions): Promise<RunningServer> {
  if (options === undefined) throw new InvalidInputError('options', 'must be an object');
  checkKnownKeys(options, START_SERVER_OPTION_KEYS, '');
  const host = options.host ?? '127.0.0.1';
  const port = options.port ?? 4680;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new IdemError('invalid_input', 'port: must be an integer 0-65535', {
      field: 'port',
      rule: 'must be an integer 0-65535',
    });
  }
  const { host: _host, port: _port, ...serverOptions } = options;
  const server = await createServer(serverOptions);
  if (!isLoopback(host) && !server.tokens.enabled) {
    await server.close();
    throw new IdemError(
      'invalid_input',
      `host: refusing to listen on non-loopback address "${host}" without API tokens (set IDEM_TOKENS or a tokens file)`,
      { field: 'host', rule: 'needs tokens when not loopback' },
    );
  }
  try {
    await server.app.listen({ host, port });
  } catch (err) {
    await server.close();
    throw err;
  }
  const address = server.app.server.address();
  const actualPort = typeof address === 'object' && address ? address.port : port;
  const urlHost = isIP(host) === 6 ? `[${host}]` : host;
  return Object.assign(server, { url: `http://${urlHost}:${actualPort}`, port: actualPort });
}
