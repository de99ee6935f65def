import type { Subscription } from '../core/subscription.js';
import { DurableSubscription } from './durableSubscription.js';

/**
 * Fault injection for tests: makes an engine-backed subscription stop renewing its lease, as an owner
 * stuck in a long pause would, so that its lease runs out. Returns false for subscriptions the engine
 * does not run in this process (e.g. the remote client's).
 */
export function suspendLeaseRenewal(sub: Subscription): boolean {
  if (!(sub instanceof DurableSubscription)) return false;
  sub.suspendLeaseRenewal();
  return true;
}
