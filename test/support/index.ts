// Shared helpers for idem's own tests (users get theirs from `idem/testkit`).
export { until, type UntilOptions } from './until.js';
export { bySpeed, fastTests, variants } from './fast.js';
export { tempDir, type TempDir } from './tempDir.js';
export { randomCategory, randomConsumer, randomIdentifier, randomStream, randomSuffix } from './names.js';
export {
  NATS_URL,
  POSTGRES_URL,
  natsAvailable,
  postgresAvailable,
  requireChromiumOrSkip,
  requireOrSkip,
  servicesRequired,
  tcpReachable,
  type Service,
} from './services.js';
export { createTempDatabase, createTempSchema, type TempDatabase } from './postgres.js';
