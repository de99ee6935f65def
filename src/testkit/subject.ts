import type { Consumer } from '../consumer/consumer.js';
import type { ConsumerTarget } from '../core/consumerTarget.js';
import type { EventStore } from '../core/eventStore.js';
import type { EffectHandlers } from '../effects/dispatcher.js';
import type { VerifyBackend } from './backend.js';

/** Which deployment of the consumer the testkit asks for: version 2 is a rebuild of version 1. */
export interface Deployment {
  /** 1 everywhere, except the new version of the rebuild scenario (2). */
  version: number;
}

/**
 * The user's consumer definition: given a source, a fresh target and the deployment, it returns
 * `createConsumer(...)` (not started). A consumer with versioned output names itself and its tables
 * after `deployment.version` (e.g. `billing_v${version}`).
 */
export type ConsumerFactory<T> = (source: EventStore, target: T, deployment: Deployment) => Consumer;

/** Reads the consumer's output from the target as JSON (sync or async). */
export type StateReader<T> = (target: T, deployment: Deployment) => unknown;

/** What every scenario runs: the user's definition and where it runs. */
export interface Subject<T extends ConsumerTarget<unknown>> {
  consumer: ConsumerFactory<T>;
  read: StateReader<T>;
  /** Called by the spy dispatcher after it recorded each call; default: record only. */
  effects: EffectHandlers | undefined;
  backend: VerifyBackend<T>;
  /** Longest wait for one consumer to catch up. */
  timeoutMs: number;
}
