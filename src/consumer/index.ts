// The consumer runtime: createConsumer, rebuildConsumer, guards, options, metrics and the target port it commits through.
export { createConsumer } from './consumer.js';
export type { Consumer, ConsumerRuntimeStatus, ConsumerState } from './consumer.js';
export type {
  AnyEvents,
  BaseHandlerContext,
  BatchHandler,
  BatchHandlerContext,
  BatchOptions,
  ConsumerBaseOptions,
  ConsumerMetricsOptions,
  ConsumerOptions,
  ErrorPolicy,
  EventFilterOf,
  EventMap,
  EventOf,
  FilterOption,
  Handler,
  HandlerContext,
  HandlerOption,
  ShredContext,
} from './options.js';
export type { CustomKeyGuard, Guard } from './guards.js';
export type { ConsumerMetricsSnapshot, LatencySummary } from './metrics.js';
export { VersionGapError } from './versionGapError.js';
export { rebuildConsumer } from './rebuild.js';
export type { Rebuild, RebuildOptions, RebuildProgress } from './rebuild.js';
export type {
  BatchRecord,
  ConsumerTarget,
  LedgerEntry,
  TargetCheckpoint,
  TargetTransaction,
} from '../core/consumerTarget.js';
