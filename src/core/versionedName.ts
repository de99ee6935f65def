import { InvalidInputError } from './errors.js';

/** A consumer name split into its base and version: `billing_v3` -> `{ base: 'billing', version: 3 }`. */
export interface VersionedName {
  base: string;
  /** null when the name has no `_vN` suffix. */
  version: number | null;
  /** What a projection appends to its table names: `_v3`, or '' for an unversioned name. */
  tableSuffix: string;
}

const VERSIONED = /^(.+?)_v(\d+)$/;

export function parseVersionedName(name: string): VersionedName {
  const m = VERSIONED.exec(name);
  if (!m) return { base: name, version: null, tableSuffix: '' };
  return { base: m[1]!, version: Number(m[2]), tableSuffix: `_v${m[2]}` };
}

/**
 * The effect scope of a consumer: its base name, so that `billing_v2` and `billing_v3` share one
 * outbox key space and a rebuild cannot send again what an earlier version sent.
 */
export function defaultEffectScope(consumer: string): string {
  return parseVersionedName(consumer).base;
}

/** The idempotency key handed to the external system: `<scope>/<key>` (consumer names never contain `/`). */
export function idempotencyKey(scope: string, key: string): string {
  return `${scope}/${key}`;
}

/** Splits an idempotency key back into scope and key. */
export function splitIdempotencyKey(value: string, field: string): { scope: string; key: string } {
  const i = value.indexOf('/');
  if (i <= 0 || i === value.length - 1)
    throw new InvalidInputError(field, 'must be an effect id of the form <scope>/<key>');
  return { scope: value.slice(0, i), key: value.slice(i + 1) };
}
