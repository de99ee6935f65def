/** `connect(url, { token })`: an `EventStore` that talks to an idem server. */
import { InvalidInputError } from '../core/errors.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';
import type { Upcasters } from '../core/upcasters.js';
import { RemoteEventStore } from './remoteStore.js';

export interface ConnectOptions {
  /** A bearer token (`IDEM_TOKEN` for the CLI). */
  token?: string;
  /** Attempts for requests safe to repeat (reads and appends) after a network failure. @default 3 */
  attempts?: number;
  /** Per-request timeout in milliseconds. @default 30000 */
  timeoutMs?: number;
  /** Applied by this client to every event it reads (streams, `readAll`, subscriptions); see `Upcasters`. */
  upcasters?: Upcasters;
  /**
   * Send appends over a WebSocket this client keeps open (`/v1/appends/ws`), opened on the first
   * append; `false` sends each group of appends as an HTTP request. A server without the socket gets
   * HTTP requests either way. @default true
   */
  appendSocket?: boolean;
}

const CONNECT_OPTION_KEYS = {
  token: true,
  attempts: true,
  timeoutMs: true,
  upcasters: true,
  appendSocket: true,
} as const satisfies KnownKeys<ConnectOptions>;

/**
 * Returns a remote store for the server at `url` (e.g. `http://127.0.0.1:4680`). Nothing is sent until the
 * first call. Appends assign event ids on the client, so a retried append is never written twice.
 */
export function connect(url: string, options: ConnectOptions = {}): RemoteEventStore {
  checkKnownKeys(options, CONNECT_OPTION_KEYS, 'options');
  const http: { token?: string; attempts?: number; timeoutMs?: number } = {};
  if (options.token !== undefined) http.token = options.token;
  if (options.attempts !== undefined) http.attempts = options.attempts;
  if (options.timeoutMs !== undefined) http.timeoutMs = options.timeoutMs;
  if (options.appendSocket !== undefined && typeof options.appendSocket !== 'boolean')
    throw new InvalidInputError('options.appendSocket', 'must be a boolean');
  return new RemoteEventStore(url, http, options.upcasters, options.appendSocket ?? true);
}
