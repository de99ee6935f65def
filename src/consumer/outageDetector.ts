import type { ResolvedOutage } from './options.js';

/**
 * Tells an outage from poison: handlers that fail for `entities` distinct entities within `windowMs`,
 * with no event handled in between, are an outage (a dependency is down); fewer are poison events,
 * dead-lettered one by one. Any handled event ends the streak.
 */
export class OutageDetector {
  /** Failing entities of the current streak, with when each last failed. */
  private readonly failing = new Map<string, number>();
  /** Entities dead-lettered during the current streak: retried once an outage is over. */
  readonly parked = new Set<string>();

  constructor(
    private readonly o: ResolvedOutage,
    private readonly now: () => number = Date.now,
  ) {}

  /** Records that `stream`'s event failed for good; true when this makes an outage. */
  failed(stream: string): boolean {
    const now = this.now();
    for (const [s, at] of this.failing) if (now - at > this.o.windowMs) this.failing.delete(s);
    this.failing.set(stream, now);
    return this.failing.size >= this.o.entities;
  }

  /** An event was handled: the streak ends (what failed meanwhile was poison). */
  succeeded(): void {
    if (this.failing.size === 0 && this.parked.size === 0) return;
    this.failing.clear();
    this.parked.clear();
  }

  /** The delay before probe number `n` (1, 2, ...): doubling from `probeDelayMs` up to `maxProbeDelayMs`. */
  probeDelay(n: number): number {
    return Math.min(this.o.maxProbeDelayMs, this.o.probeDelayMs * 2 ** Math.min(30, n - 1));
  }
}
