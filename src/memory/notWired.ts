// Temporary: replaced when the subscription engine is wired into the stores.
import { IdemError } from '../core/errors.js';
import type { ConsumerAdmin, SubscribeOptions, Subscription } from '../core/subscription.js';

const fail = (): never => {
  throw new IdemError('unavailable', 'subscriptions are not wired into this store yet');
};
export const notWiredAdmin: ConsumerAdmin = { list: fail, get: fail, reset: fail, delete: fail };
export function notWiredSubscribe(_c: string, _o?: SubscribeOptions): Promise<Subscription> {
  return Promise.reject(new IdemError('unavailable', 'subscriptions are not wired into this store yet'));
}
