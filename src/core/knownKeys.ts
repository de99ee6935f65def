import { InvalidInputError } from './errors.js';

/**
 * Every key of an options type, each mapped to `true`. Written as `{ ... } satisfies KnownKeys<T>`
 * beside the type, the compiler refuses a list that misses a key of `T` or names one it lacks, so a
 * new option cannot be forgotten here.
 */
export type KnownKeys<T> = { readonly [K in keyof T]-?: true };

/**
 * Refuses an options object with a key outside `known`: JavaScript callers and configuration read
 * at run time are not protected by the types, and a misspelt option (`expectedVersoin`) would
 * otherwise be ignored silently. The message names the key and suggests the closest known one.
 *
 * `field` is the object's own path (`'options'`, `'batch'`), or `''` for a factory's options
 * argument, whose keys are named bare (`durability`), as its other errors name them.
 * `undefined` passes (an omitted options argument); null, an array or a primitive is refused.
 * This runs on every append, so a valid object costs one `for...in` and a lookup per key.
 */
export function checkKnownKeys(value: unknown, known: object, field: string): void {
  if (value === undefined) return;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidInputError(field === '' ? 'options' : field, 'must be an object');
  }
  for (const key in value) {
    if (!Object.hasOwn(known, key) && Object.hasOwn(value, key)) {
      throw new InvalidInputError(
        field === '' ? key : `${field}.${key}`,
        unknownRule(key, Object.keys(known)),
      );
    }
  }
}

function unknownRule(key: string, known: string[]): string {
  const guess = closest(key, known);
  if (guess !== undefined) return `unknown option; did you mean ${guess}?`;
  return `unknown option (known: ${known.join(', ')})`;
}

/** The known key nearest to `key` by edit distance, when it is near enough to be a slip. */
export function closest(key: string, known: readonly string[]): string | undefined {
  const k = key.toLowerCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const d = editDistance(k, candidate.toLowerCase());
    // One slip per four characters of the shorter name, at least one: `bacth` -> `batch` and
    // `pollInterval` -> `pollIntervalMs`, but not `force` -> `source`.
    const allowed = Math.max(1, Math.floor(Math.min(k.length, candidate.length) / 4));
    if (d <= allowed && d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/**
 * Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b`: the optimal string
 * alignment distance, so a transposed pair (`expectedVersoin`) is one slip, not two.
 */
export function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row: number[] = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, row[j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      }
      row.push(d);
    }
    rows.push(row);
  }
  return rows[a.length]![b.length]!;
}
