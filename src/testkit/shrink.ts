/** What shrinking an input took. */
export interface ShrinkResult<T> {
  items: T[];
  /** Predicate runs spent. */
  runs: number;
  /** False when the budget ran out before the input was 1-minimal. */
  minimal: boolean;
}

/**
 * Delta debugging (ddmin) over a list: the smallest sub-list, in order, for which `fails` still holds,
 * within `maxRuns` predicate runs. Each run is a whole scenario on fresh stores, so the budget matters
 * more than the last element: a larger input reported honestly beats a search that never ends.
 */
export async function shrinkList<T>(
  items: readonly T[],
  fails: (candidate: T[]) => Promise<boolean>,
  maxRuns = 60,
): Promise<ShrinkResult<T>> {
  let current = [...items];
  let runs = 0;
  let n = 2;
  while (current.length >= 2) {
    const chunk = Math.ceil(current.length / n);
    let reduced = false;
    for (let start = 0; start < current.length && runs < maxRuns; start += chunk) {
      // The complement of one chunk: drop it and see whether the failure stays.
      const candidate = [...current.slice(0, start), ...current.slice(start + chunk)];
      if (candidate.length === 0) continue;
      runs++;
      if (await fails(candidate)) {
        current = candidate;
        n = Math.max(n - 1, 2);
        reduced = true;
        break;
      }
    }
    if (runs >= maxRuns) return { items: current, runs, minimal: false };
    if (!reduced) {
      if (n >= current.length) break;
      n = Math.min(current.length, n * 2);
    }
  }
  return { items: current, runs, minimal: true };
}
