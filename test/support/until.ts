/** Options of `until`. */
export interface UntilOptions {
  /** Give up after this long. @default 10000 */
  timeoutMs?: number;
  /** Time between two checks. @default 10 */
  intervalMs?: number;
  /** What the failure says was being waited for. @default 'condition' */
  message?: string;
}

/**
 * Polls `cond` until it returns a truthy value and resolves with that value; rejects after
 * `timeoutMs` with an error naming `message`. An error thrown by `cond` rejects at once.
 * Use it instead of fixed sleeps: it returns as soon as the condition holds.
 */
export async function until<T>(
  cond: () => T | Promise<T>,
  { timeoutMs = 10_000, intervalMs = 10, message = 'condition' }: UntilOptions = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await cond();
    if (value) return value;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${message}`);
    await new Promise<void>((resolve) => setTimeout(resolve, intervalMs));
  }
}
