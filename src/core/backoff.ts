/**
 * Exponential backoff with jitter: retry n (1-based) waits a random time between half and all of
 * `min(max, initial * 2^(n-1))`, so that many consumers retrying together spread out.
 */
export function backoffDelay(
  retry: number,
  initialMs: number,
  maxMs: number,
  random: () => number = Math.random,
): number {
  const base = Math.min(maxMs, initialMs * 2 ** Math.max(0, retry - 1));
  return Math.round(base / 2 + (random() * base) / 2);
}

/** Resolves after `ms`, or at once when `signal` aborts (never rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
