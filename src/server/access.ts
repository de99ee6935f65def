/** What a principal may do: scope checks and the optional stream-prefix restriction. */
import {
  ConsumerBusyError,
  ConsumerIdentityConflictError,
  IdemError,
  NotFoundError,
} from '../core/errors.js';
import type { EventFilter } from '../core/filter.js';
import type { ConsumerInfo } from '../core/subscription.js';
import type { Principal, Scope } from './tokens.js';

export function requireScope(p: Principal, scope: Scope): void {
  if (!p.scopes.has(scope)) {
    throw new IdemError('forbidden', `token "${p.name}" lacks the "${scope}" scope`, {
      scope,
      token: p.name,
    });
  }
}

export function allowsStream(p: Principal, stream: string): boolean {
  return p.streamPrefixes === null || p.streamPrefixes.some((prefix) => stream.startsWith(prefix));
}

/**
 * A stream outside a restricted token's prefixes does not exist for it: the answer is the `not_found`
 * a missing name gets, so a restricted token cannot learn which names other tenants use.
 */
export function requireStream(p: Principal, stream: string): void {
  if (!allowsStream(p, stream)) throw new NotFoundError('stream', stream);
}

/**
 * True when every event the filter can match lies inside the principal's prefixes: the filter must
 * name stream prefixes, each inside an allowed prefix, and no categories.
 */
export function filterWithin(p: Principal, filter: EventFilter | undefined): boolean {
  if (p.streamPrefixes === null) return true;
  if (!filter || (filter.categories && filter.categories.length > 0)) return false;
  const prefixes = filter.streamPrefixes ?? [];
  return prefixes.length > 0 && prefixes.every((q) => allowsStream(p, q));
}

export function requireFilterWithin(p: Principal, filter: EventFilter | undefined, what: string): void {
  if (!filterWithin(p, filter)) {
    throw new IdemError(
      'forbidden',
      `token "${p.name}" is limited to streams starting with ${p.streamPrefixes!.map((s) => JSON.stringify(s)).join(', ')}; ` +
        `${what} must filter on streamPrefixes inside them (and no categories)`,
      { token: p.name, streamPrefixes: p.streamPrefixes },
    );
  }
}

/** A prefix-restricted principal sees only consumers whose filter lies inside its prefixes; others are `not_found`, as if missing. */
export function requireConsumerVisible(p: Principal, info: ConsumerInfo): void {
  if (!filterWithin(p, info.filter)) throw new NotFoundError('consumer', info.name);
}

/**
 * The error as a principal may see it: a restricted token gets `consumer_busy` without the owner (a
 * peer address and another token's name) and `consumer_identity_conflict` without the filter the
 * consumer is registered with (another tenant's streams), since both can be someone else's.
 */
export function errorFor(p: Principal | null, e: IdemError): IdemError {
  if (p === null || p.streamPrefixes === null) return e;
  const consumer = String(e.details.consumer);
  if (e.code === 'consumer_busy') return new ConsumerBusyError(consumer, null, null);
  if (e.code === 'consumer_identity_conflict')
    return new ConsumerIdentityConflictError(consumer, null, e.details.requestedFilter);
  return e;
}
