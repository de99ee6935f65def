/**
 * A level-triggered wake-up signal without lost wake-ups: read `generation` before checking for work,
 * then `wait(generation, ms)` resolves at once if anything notified in between, else on the next
 * `notify()` or after `ms` (the polling fallback).
 */
export class Wakeup {
  private gen = 0;
  private readonly waiters = new Set<() => void>();

  get generation(): number {
    return this.gen;
  }

  notify(): void {
    this.gen++;
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const w of waiters) w();
  }

  wait(since: number, timeoutMs: number): Promise<void> {
    if (this.gen !== since) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.waiters.add(done);
    });
  }
}
