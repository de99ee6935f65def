// Effects exactly once (outbox + dispatcher), consumer versions, promote and ledger reset.
export { createEffectDispatcher } from './dispatcher.js';
export type {
  EffectCallInfo,
  EffectDispatcher,
  EffectDispatcherMetrics,
  EffectDispatcherOptions,
  EffectHandler,
  EffectHandlers,
  EffectRetryOptions,
} from './dispatcher.js';
export type { ConsumerEffectsOptions } from './consumerEffects.js';
export {
  activeVersion,
  catchUpState,
  listConsumerVersions,
  NotCaughtUpError,
  promoteConsumer,
  resetLedger,
} from './versions.js';
export { listEffects, retryEffects, effectCounts } from './admin.js';
export { defaultEffectScope, idempotencyKey, parseVersionedName } from '../core/versionedName.js';
export type {
  ActiveVersionRecord,
  ConsumerVersionRecord,
  EffectCallOptions,
  EffectCounts,
  EffectRecord,
  EffectStatus,
  EffectWrite,
} from '../core/effectTypes.js';
export type { LedgerReset } from '../core/effectOutbox.js';
