import { isIdemError } from '../core/errors.js';
import type { ConsumerInfo, ConsumerStatus } from '../core/subscription.js';
import type { ConsumerRecord } from './stateBackend.js';
import type { SubscriptionSource } from './subscriptionSource.js';

/** Up to this many events behind, lag is counted exactly (matching events); beyond it, by position. */
export const EXACT_LAG_LIMIT = 10_000;

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
 * vanished without releasing).
 */
export async function consumerInfo(
  source: SubscriptionSource,
  state: ConsumerRecord,
  head: number,
): Promise<ConsumerInfo> {
  const now = Date.now();
  let lag = 0;
  let lagSeconds = 0;
  let error: ConsumerInfo['error'];
  try {
    ({ lag, lagSeconds } = await lagOf(source, state, head, now));
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
  const status: ConsumerStatus = live
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
    createdAt: state.createdAt,
    updatedAt: state.updatedAt,
    ...(error ? { error } : {}),
  };
}

/** Matching events after the cursor, counted exactly up to `EXACT_LAG_LIMIT` behind, and the oldest one's age. */
async function lagOf(
  source: SubscriptionSource,
  state: ConsumerRecord,
  head: number,
  now: number,
): Promise<{ lag: number; lagSeconds: number }> {
  const behind = Math.max(0, head - state.position);
  let lag = 0;
  let lagSeconds = 0;
  if (behind === 0) return { lag, lagSeconds };
  const exact = behind <= EXACT_LAG_LIMIT;
  for await (const e of source.readAll({
    after: state.position,
    filter: state.filter,
    ...(exact ? {} : { limit: 1 }),
  })) {
    if (lag === 0) lagSeconds = Math.max(0, (now - Date.parse(e.recordedAt)) / 1000);
    lag++;
  }
  if (!exact && lag > 0) lag = behind;
  return { lag, lagSeconds };
}
