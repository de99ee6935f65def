import type { ConsumerInfo, ConsumerStatus } from '../core/subscription.js';
import type { ConsumerState } from './stateBackend.js';
import type { EventFilter } from '../core/filter.js';
import type { MatchCount, SubscriptionSource } from './subscriptionSource.js';

/**
 * Lag counts the matching events among at most this many positions after the cursor (one query per
 * consumer); a consumer further behind counts every position beyond them too.
 */
export const EXACT_LAG_LIMIT = 10_000;

/** True while `state` has an owner whose lease has not run out. */
export function leaseLive(state: Pick<ConsumerState, 'owner' | 'leaseExpiresAt'>, now = Date.now()): boolean {
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
  state: ConsumerState,
  head: number,
): Promise<ConsumerInfo> {
  const now = Date.now();
  const behind = Math.max(0, head - state.position);
  let lag = 0;
  let lagSeconds = 0;
  if (behind > 0) {
    const upTo = Math.min(head, state.position + EXACT_LAG_LIMIT);
    const counted = await countMatching(source, state.position, upTo, state.filter);
    lag = counted.count + (head - upTo);
    // Beyond the positions counted, the first one not counted is as old as a match there can be.
    const oldest = counted.oldest ?? (upTo < head ? await recordedAfter(source, upTo) : null);
    if (oldest !== null) lagSeconds = Math.max(0, (now - Date.parse(oldest)) / 1000);
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
  };
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
