import type { RecordedEvent } from '../core/event.js';
import type { ResolvedOutage } from './options.js';

/** How a held event failed: its attempts were used up while an outage may have been forming. */
export interface HeldFailure {
  position: number;
  error: Error;
  attempts: number;
  /** True once another entity failed in the same streak: a cause they share may pass. */
  shared: boolean;
}

/** The detector's state, kept so that a transaction that rolls back leaves no trace in it. */
export interface OutageSnapshot {
  streak: Map<string, number>;
  grewAt: number;
  held: Map<string, HeldFailure>;
  isolated: Set<string>;
  parked: Set<string>;
}

/**
 * Tells an outage from poison. A failure streak is the distinct entities whose events failed for
 * good with no event handled since, each within `windowMs` of now; `entities` of them make an outage
 * (a dependency is down): the consumer pauses and probes instead of dead-lettering them.
 *
 * While the streak is shorter, each failing entity is held, not dead-lettered: its event is not
 * tried again, its later events wait behind it, the cursor stays before it, the other entities go
 * on. A held entity is poison, dead-lettered with the failure it had, once the streak shows it:
 * another entity's event is handled (the streak ends: its failures were isolated), or no new entity
 * has joined the streak for `holdMs` (the failures stopped spreading), or its failure is older than
 * `windowMs`. One that failed in a streak of several entities gets one last attempt first.
 */
export class OutageDetector {
  /** The entities of the current streak, with when each last failed. */
  private streak = new Map<string, number>();
  /** When the last entity joined the streak. */
  private grewAt = 0;
  /** The held failing event of each held entity. */
  private held = new Map<string, HeldFailure>();
  /** Held entities that were failing when another entity's event was handled: poison. */
  private isolated = new Set<string>();
  /** Entities dead-lettered during the current streak: retried once an outage is over. */
  parked = new Set<string>();

  constructor(
    private readonly o: ResolvedOutage,
    private readonly now: () => number = Date.now,
  ) {}

  /** Records that `stream`'s event failed for good: `outage` when the streak makes one, else `hold`. */
  failed(stream: string): 'outage' | 'hold' {
    const now = this.now();
    this.prune(now);
    if (!this.streak.has(stream)) this.grewAt = now;
    this.streak.set(stream, now);
    if (this.streak.size >= 2)
      for (const [s, h] of this.held) if (!h.shared) this.held.set(s, { ...h, shared: true });
    return this.streak.size >= this.o.entities ? 'outage' : 'hold';
  }

  /** Holds `e`, which failed for good with `error` after `attempts`, until the streak tells what it is. */
  hold(e: RecordedEvent, error: Error, attempts: number): void {
    this.held.set(e.stream, { position: e.position, error, attempts, shared: this.streak.size >= 2 });
  }

  /** When `e` is a held failing event: how it failed, and whether it is poison now (to be dead-lettered). */
  heldFailure(e: RecordedEvent): (HeldFailure & { poison: boolean }) | null {
    if (this.held.size === 0) return null;
    const h = this.held.get(e.stream);
    if (h?.position !== e.position) return null;
    const now = this.now();
    this.prune(now);
    const poison =
      this.isolated.has(e.stream) || !this.streak.has(e.stream) || now >= this.grewAt + this.o.holdMs;
    return { ...h, poison };
  }

  /** `stream`'s failing event was dead-lettered: it is no longer held. */
  deadLettered(stream: string): void {
    this.held.delete(stream);
    this.isolated.delete(stream);
    this.parked.add(stream);
  }

  /**
   * An event of `stream` was handled: the streak ends, and the entities held in it are poison. Without
   * `stream` (an outage is over, its failures are to be tried again) everything is forgotten.
   */
  succeeded(stream?: string): void {
    if (this.streak.size === 0 && this.parked.size === 0 && this.held.size === 0) return;
    if (stream === undefined) {
      this.held.clear();
      this.isolated.clear();
    } else for (const s of this.held.keys()) if (s !== stream) this.isolated.add(s);
    this.streak.clear();
    this.parked.clear();
  }

  /** Forgets the held events (a new subscription delivers them again; they are tried afresh) and the streak. */
  reset(): void {
    this.succeeded();
  }

  /** When the held events are next to be looked at (a held entity may be poison by then); Infinity for none. */
  dueAt(): number {
    if (this.held.size === 0) return Infinity;
    if (this.isolated.size > 0) return this.now();
    // A millisecond late, so that a timer firing early finds the entity poison.
    let due = this.grewAt + this.o.holdMs + 1;
    for (const s of this.held.keys()) due = Math.min(due, (this.streak.get(s) ?? 0) + this.o.windowMs + 1);
    return due;
  }

  /** The delay before probe number `n` (1, 2, ...): doubling from `probeDelayMs` up to `maxProbeDelayMs`. */
  probeDelay(n: number): number {
    return Math.min(this.o.maxProbeDelayMs, this.o.probeDelayMs * 2 ** Math.min(30, n - 1));
  }

  /** The state to `restore` if a transaction rolls back (null while there is none: the common case). */
  snapshot(): OutageSnapshot | null {
    if (this.streak.size === 0 && this.parked.size === 0 && this.held.size === 0) return null;
    return {
      streak: new Map(this.streak),
      grewAt: this.grewAt,
      held: new Map(this.held),
      isolated: new Set(this.isolated),
      parked: new Set(this.parked),
    };
  }

  /** Back to `s`: what a rolled-back transaction told the detector is undone. */
  restore(s: OutageSnapshot | null): void {
    this.streak = s?.streak ?? new Map<string, number>();
    this.grewAt = s?.grewAt ?? 0;
    this.held = s?.held ?? new Map<string, HeldFailure>();
    this.isolated = s?.isolated ?? new Set<string>();
    this.parked = s?.parked ?? new Set<string>();
  }

  /** Drops the entities whose failure is older than the window. */
  private prune(now: number): void {
    for (const [s, at] of this.streak) if (now - at > this.o.windowMs) this.streak.delete(s);
  }
}
