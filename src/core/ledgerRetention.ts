/**
 * Ledger retention: the options of `target.pruneLedger` and of a consumer's `ledger: { retain }`
 * policy, checked here once for every target. No I/O.
 */
import { InvalidInputError } from './errors.js';
import { checkKnownKeys, type KnownKeys } from './knownKeys.js';
import type { PruneLedgerOptions } from './consumerTarget.js';
import { boundedInt } from './validation.js';

/** Most events whose ledger rows `keep` / `retain: { events }` may hold back. */
export const MAX_LEDGER_KEEP = 10_000_000;
/** Longest `retain: { age }`: ten years. */
export const MAX_LEDGER_AGE_MS = 3650 * 86_400_000;

const PRUNE_OPTION_KEYS = { keep: true, through: true } as const satisfies KnownKeys<PruneLedgerOptions>;

/** `pruneLedger`'s options checked, with `keep` 0 and `through` unbounded by default. */
export function resolvePruneOptions(options: PruneLedgerOptions | undefined): {
  keep: number;
  through: number;
} {
  checkKnownKeys(options, PRUNE_OPTION_KEYS, 'options');
  return {
    keep: boundedInt(options?.keep, 'options.keep', 0, MAX_LEDGER_KEEP, 0),
    through: boundedInt(
      options?.through,
      'options.through',
      0,
      Number.MAX_SAFE_INTEGER,
      Number.MAX_SAFE_INTEGER,
    ),
  };
}

/**
 * How long a consumer keeps its dedup ledger rows once the checkpoint covers them:
 * - `'checkpoint'`: no longer (one-key guards on a log whose ids never repeat);
 * - `{ events: N }`: the rows of the newest N handled events;
 * - `{ age: '30d' }`: the rows of events recorded within the age (`s`, `m`, `h` or `d`): the window
 *   in which a late retry of a command (`command-id` or a key guard) is still recognised.
 */
export type LedgerRetain = 'checkpoint' | { events: number } | { age: string };

export interface LedgerOptions {
  retain: LedgerRetain;
}

export const LEDGER_OPTION_KEYS = { retain: true } as const satisfies KnownKeys<LedgerOptions>;

/** A checked retention policy. */
export type ResolvedRetain = { kind: 'events'; keep: number } | { kind: 'age'; ms: number };

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses `ledger` (field `ledger`); null without one. */
export function resolveLedgerOptions(ledger: LedgerOptions | undefined): ResolvedRetain | null {
  if (ledger === undefined) return null;
  if (ledger === null || typeof ledger !== 'object')
    throw new InvalidInputError('ledger', 'must be an object like { retain: ... }');
  checkKnownKeys(ledger, LEDGER_OPTION_KEYS, 'ledger');
  const retain: unknown = ledger.retain;
  if (retain === 'checkpoint') return { kind: 'events', keep: 0 };
  const rule = "must be 'checkpoint', { events: N } or { age: '30d' }";
  if (retain === null || typeof retain !== 'object') throw new InvalidInputError('ledger.retain', rule);
  const keys = Object.keys(retain);
  if (keys.length === 1 && keys[0] === 'events') {
    const keep = boundedInt(
      (retain as { events: unknown }).events,
      'ledger.retain.events',
      1,
      MAX_LEDGER_KEEP,
      0,
    );
    return { kind: 'events', keep };
  }
  if (keys.length === 1 && keys[0] === 'age') {
    const age = (retain as { age: unknown }).age;
    const m = typeof age === 'string' ? /^([1-9][0-9]{0,9})([smhd])$/.exec(age) : null;
    const ms = m ? Number(m[1]) * UNIT_MS[m[2]!]! : NaN;
    if (!m || ms > MAX_LEDGER_AGE_MS)
      throw new InvalidInputError(
        'ledger.retain.age',
        "must be a whole number and a unit s, m, h or d (like '30d'), at most 3650d",
      );
    return { kind: 'age', ms };
  }
  throw new InvalidInputError('ledger.retain', rule);
}

/**
 * A cursor below the pruned ledger horizon: the ledger no longer recognises the events it would
 * redeliver. `field` is what is refused (`position` of a reset, `cursor` at start); `what` says
 * where it is (`40 is`).
 */
export function belowHorizon(name: string, horizon: number, field: string, what: string): InvalidInputError {
  return new InvalidInputError(
    field,
    `must be at least ${horizon} (${what} below it): consumer "${name}" pruned its dedup ledger through ` +
      `position ${horizon}, so events at or below it would be applied again; rebuild into a new ` +
      'consumer version instead (idem consumer rebuild, see docs/data-lifecycle.md)',
  );
}
