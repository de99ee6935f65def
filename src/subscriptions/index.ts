// The subscription engine, shared by every store (internal: stores expose it through the EventStore port).
export { SubscriptionService, type SubscriptionServiceOptions } from './subscriptionService.js';
export type { SubscriptionSource } from './subscriptionSource.js';
export type * from './stateBackend.js';
export { leaseLive } from './consumerInfo.js';
export { suspendLeaseRenewal } from './faults.js';
