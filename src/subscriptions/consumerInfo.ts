import { isIdemError } from '../core/errors.js';
import type { ConsumerInfo, ConsumerStatus } from '../core/subscription.js';
import type { ConsumerRecord } from './stateBackend.js';
import { lagOf, type Lag } from './lag.js';
import type { SubscriptionSource } from './subscriptionSource.js';

/** True while `state` has an owner whose lease has not run out. */
export function leaseLive(
  state: Pick<ConsumerRecord, 'owner' | 'leaseExpiresAt'>,
  now = Date.now(),
): boolean {
  return state.owner !== null && state.leaseExpiresAt !== null && Date.parse(state.leaseExpiresAt) > now;
}

/**
 * The admin view of a consumer: the stored state plus head, lag and a derived status:
 * `running` (a live lease and events to process), `idle` (a live lease, nothing to process),
 * `failed` (released by `fail`), `stopped` (no live lease: closed, never started, or an owner that
 * vanished without releasing); `paused` before all of them while the consumer is paused.
 */
export async function consumerInfo(
  source: SubscriptionSource,
  state: ConsumerRecord,
  head: number,
  known?: Lag,
  now = Date.now(),
): Promise<ConsumerInfo> {
  let lag = 0;
  let lagSeconds = 0;
  let error: ConsumerInfo['error'];
  try {
    const counted = known ?? (await lagOf(source, state, head, now));
    if ('error' in counted) throw counted.error;
    ({ lag, lagSeconds } = counted);
  } catch (err) {
    // One consumer whose lag cannot be read (a filter stored before the filter limits, ...) is shown
    // with its error; the listing and the metrics of the others go on. A store that is down is not
    // one consumer's problem.
    if (isIdemError(err, 'closed') || isIdemError(err, 'unavailable')) throw err;
    error = isIdemError(err)
      ? { code: err.code, message: err.message }
      : { code: 'internal', message: err instanceof Error ? err.message : String(err) };
  }
  const live = leaseLive(state, now);
  const status: ConsumerStatus = state.pause
    ? 'paused'
    : live
      ? lag > 0
        ? 'running'
        : 'idle'
      : state.status === 'failed'
        ? 'failed'
        : 'stopped';
  return {
    name: state.name,
    filter: state.filter,
    position: state.position,
    head,
    lag,
    lagSeconds,
    status,
    owner: live ? state.owner : null,
    epoch: state.epoch,
    leaseExpiresAt: live ? state.leaseExpiresAt : null,
    lastError: state.lastError,
    failedEvent: state.failedEvent,
    parked: state.parked,
    pause: state.pause,
    createdAt: state.createdAt,
    updatedAt: state.updatedAt,
    ...(error ? { error } : {}),
  };
}
