import type { ResolvedOutage } from './options.js';

/** What to do with an event that failed for good while outage detection is on. */
export type FailureVerdict = 'outage' | 'hold' | 'park';

/**
 * Tells an outage from poison: handlers that fail for `entities` distinct entities within `windowMs`,
 * with no event handled in between, are an outage (a dependency is down); fewer are poison events,
 * dead-lettered one by one. Any handled event ends the streak.
 *
 * While an outage may be forming, a failing entity is held, not dead-lettered: the runtime retries it
 * later and goes on with the other entities. It is dead-lettered once the window shows it is isolated
 * poison: another entity's event was handled meanwhile, or its window passed with too few failures.
 */
export class OutageDetector {
  /** Failing entities of the current streak: when each first and last failed. */
  private readonly failing = new Map<string, { first: number; last: number }>();
  /** Entities that were failing when another entity's event was handled: poison, parked at their next failure. */
  private readonly isolated = new Set<string>();
  /** Entities dead-lettered during the current streak: retried once an outage is over. */
  readonly parked = new Set<string>();

  constructor(
    private readonly o: ResolvedOutage,
    private readonly now: () => number = Date.now,
  ) {}

  /** Records that `stream`'s event failed for good, and says whether to hold it, park it, or stop for an outage. */
  failed(stream: string): FailureVerdict {
    const now = this.now();
    for (const [s, f] of this.failing) if (now - f.last > this.o.windowMs) this.failing.delete(s);
    if (this.isolated.delete(stream)) return 'park';
    const first = this.failing.get(stream)?.first ?? now;
    this.failing.set(stream, { first, last: now });
    if (this.failing.size >= this.o.entities) return 'outage';
    return now - first < this.o.windowMs ? 'hold' : 'park';
  }

  /** True when `stream` was failing when another entity's event was handled: it is poison. */
  isolatedNow(stream: string): boolean {
    return this.isolated.has(stream);
  }

  /**
   * An event of `stream` was handled: the streak ends, and the other entities failing in it are
   * isolated poison. Without `stream` (an outage is over) everything is forgotten.
   */
  succeeded(stream?: string): void {
    if (stream === undefined) this.isolated.clear();
    else {
      this.isolated.delete(stream);
      for (const s of this.failing.keys()) if (s !== stream) this.isolated.add(s);
    }
    if (this.failing.size === 0 && this.parked.size === 0) return;
    this.failing.clear();
    this.parked.clear();
  }

  /** The delay before probe number `n` (1, 2, ...): doubling from `probeDelayMs` up to `maxProbeDelayMs`. */
  probeDelay(n: number): number {
    return Math.min(this.o.maxProbeDelayMs, this.o.probeDelayMs * 2 ** Math.min(30, n - 1));
  }
}
