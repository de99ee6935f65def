export * from './errors.js';
export * from './json.js';
export * from './event.js';
export * from './expectedVersion.js';
export * from './filter.js';
export { MAX_PARTITIONS, streamHash, streamPartition } from './streamHash.js';
export {
  DEFAULT_LIMITS,
  MAX_CONSUMER_NAME_LENGTH,
  MAX_STREAM_LENGTH,
  MAX_TYPE_LENGTH,
  type StoreLimits,
} from './limits.js';
// Types only: the known-keys lists beside the option types are internal.
export type * from './eventStore.js';
export type * from './consumerSource.js';
export type * from './subscription.js';
export type { MigrationStatus } from './migrationStatus.js';
export { parseHistoryTime, type HistoryBound, type HistoryBoundOptions } from './history.js';
export { MAX_SCHEMA_VERSION, schemaVersionOf, type Upcaster, type Upcasters } from './upcasters.js';
export { isUuid, uuidv7 } from './uuid.js';
export { validateStreamName, validateConsumerName } from './validation.js';
