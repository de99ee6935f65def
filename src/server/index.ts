// `idem/server`: the HTTP + WebSocket server, embeddable in a user's own process.
export { createServer, type IdemServer, type ServerOptions } from './createServer.js';
export { startServer, isLoopback, type RunningServer, type StartServerOptions } from './startServer.js';
export { DEFAULT_SERVER_LIMITS, type ServerLimits } from './context.js';
export {
  TokenRegistry,
  loadTokens,
  parseTokens,
  sha256Hex,
  SCOPES,
  type Scope,
  type TokenConfig,
  type Principal,
} from './tokens.js';
export { statusForCode } from './httpErrors.js';
export type { MigrationStatus, HealthReport } from './storeHealth.js';
export type * from '../core/protocol.js';
export { PROTOCOL_VERSION } from '../core/protocol.js';
