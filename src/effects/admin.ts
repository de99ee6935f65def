import type { ConsumerTarget } from '../core/consumerTarget.js';
import { InvalidInputError } from '../core/errors.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';
import { splitIdempotencyKey } from '../core/versionedName.js';
import { withOutbox } from './outbox.js';
import {
  EFFECT_STATUSES,
  type EffectCounts,
  type EffectRecord,
  type EffectStatus,
} from '../core/effectTypes.js';

export interface ListEffectsOptions {
  status?: EffectStatus;
  /** Only this scope (a consumer's base name). */
  scope?: string;
  /** @default 100 */
  limit?: number;
}

const LIST_EFFECTS_OPTION_KEYS = {
  status: true,
  scope: true,
  limit: true,
} as const satisfies KnownKeys<ListEffectsOptions>;

/** Outbox rows, oldest first. */
export async function listEffects<Tx>(
  target: ConsumerTarget<Tx>,
  options: ListEffectsOptions = {},
): Promise<EffectRecord[]> {
  checkKnownKeys(options, LIST_EFFECTS_OPTION_KEYS, 'options');
  if (options.status !== undefined && !EFFECT_STATUSES.includes(options.status)) {
    throw new InvalidInputError('status', `must be one of ${EFFECT_STATUSES.join(', ')}`);
  }
  const limit = options.limit ?? 100;
  if (!Number.isSafeInteger(limit) || limit < 1)
    throw new InvalidInputError('limit', 'must be an integer >= 1');
  return withOutbox(target, (o, tx) =>
    o.list(tx, {
      limit,
      ...(options.status ? { status: options.status } : {}),
      ...(options.scope ? { scope: options.scope } : {}),
    }),
  );
}

/**
 * Makes effects pending again with a fresh attempt count: one failed or suppressed effect by its id
 * (`<scope>/<key>`, as listed), or every failed one. Resolves with the number of rows changed.
 */
export async function retryEffects<Tx>(
  target: ConsumerTarget<Tx>,
  which: string | { allFailed: true },
): Promise<number> {
  const arg = typeof which === 'string' ? splitIdempotencyKey(which, 'effect') : 'all-failed';
  return withOutbox(target, (o, tx) => o.retry(tx, arg));
}

/** Rows per status. */
export async function effectCounts<Tx>(target: ConsumerTarget<Tx>): Promise<EffectCounts> {
  return withOutbox(target, (o, tx) => o.counts(tx));
}
