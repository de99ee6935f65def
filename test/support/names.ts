import { randomBytes } from 'node:crypto';

/** Eight random hex characters. */
export function randomSuffix(bytes = 4): string {
  return randomBytes(bytes).toString('hex');
}

/** A unique stream name in `category`, e.g. `invoice-1a2b3c4d` (its category is `invoice`). */
export function randomStream(category = 'test'): string {
  return `${category}-${randomSuffix()}`;
}

/** A unique category (no `-`), so streams made with it do not collide with other tests' streams. */
export function randomCategory(prefix = 'cat'): string {
  return `${prefix}${randomSuffix()}`;
}

/** A unique, valid consumer name (`[A-Za-z0-9_.:-]`), e.g. `billing_1a2b3c4d_v1`. */
export function randomConsumer(prefix = 'consumer'): string {
  return `${prefix}_${randomSuffix()}_v1`;
}

/** A unique lower-case identifier usable as a PostgreSQL database or schema name. */
export function randomIdentifier(prefix = 'idem_test'): string {
  return `${prefix}_${randomSuffix(6)}`;
}
