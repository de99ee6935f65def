import { isIdemError } from '../core/errors.js';
import type { ConsumerInfo, ConsumerStatus } from '../core/subscription.js';
import type { ConsumerRecord } from './stateBackend.js';
import { normalizeFilter, type EventFilter } from '../core/filter.js';
import type { MatchCount, SubscriptionSource } from './subscriptionSource.js';

/**
 * Lag counts the matching events among at most this many positions after the cursor (one query per
 * consumer); a consumer further behind counts every position beyond them too.
 */
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
 * vanished without releasing); `paused` before all of them while the consumer is paused.
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

/** Matching events after the cursor, counted exactly up to `EXACT_LAG_LIMIT` behind, and the oldest one's age. */
async function lagOf(
  source: SubscriptionSource,
  state: ConsumerRecord,
  head: number,
  now: number,
): Promise<{ lag: number; lagSeconds: number }> {
  // A filter stored before the filter limits is refused here as it would be on subscribe, on every store.
  const filter = normalizeFilter(state.filter);
  if (head <= state.position) return { lag: 0, lagSeconds: 0 };
  const upTo = Math.min(head, state.position + EXACT_LAG_LIMIT);
  const counted = await countMatching(source, state.position, upTo, filter);
  const lag = counted.count + (head - upTo);
  // Beyond the positions counted, the first one not counted is as old as a match there can be.
  const oldest = counted.oldest ?? (upTo < head ? await recordedAfter(source, upTo) : null);
  return { lag, lagSeconds: oldest === null ? 0 : Math.max(0, (now - Date.parse(oldest)) / 1000) };
}

/** The source's `countMatching`, or the same collected from `readAll`. */
async function countMatching(
  source: SubscriptionSource,
  after: number,
  upTo: number,
  filter: EventFilter,
): Promise<MatchCount> {
  if (source.countMatching) return source.countMatching(after, upTo, filter);
  let count = 0;
  let oldest: string | null = null;
  for await (const e of source.readAll({ after, filter })) {
    if (e.position > upTo) break;
    oldest ??= e.recordedAt;
    count++;
  }
  return { count, oldest };
}

/** When the event right after `position` was recorded (null past the head). */
async function recordedAfter(source: SubscriptionSource, position: number): Promise<string | null> {
  for await (const e of source.readAll({ after: position, limit: 1 })) return e.recordedAt;
  return null;
}
