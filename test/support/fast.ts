// `npm run test:fast` sets IDEM_TEST_FAST=1: the suites then run one variant per kind of store or
// target and their small sizes, so the inner loop stays short; `npm test` (and CI) runs them all.

/** True in the inner loop (`npm run test:fast`), false in `npm test`. */
export const fastTests = process.env.IDEM_TEST_FAST === '1';

/** `full` in `npm test`, `fast` in the inner loop. */
export function bySpeed<T>(full: T, fast: T): T {
  return fastTests ? fast : full;
}

/**
 * Every variant in `npm test`; in the inner loop only the first, so list the variant that carries the
 * most code (the default options) first.
 */
export function variants<T>(all: readonly T[]): readonly T[] {
  return fastTests ? all.slice(0, 1) : all;
}
