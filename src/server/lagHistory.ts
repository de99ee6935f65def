/**
 * The last hour of every consumer's lag, sampled by the server itself for the dashboard's chart. It
 * lives in memory only: a restarted server starts an empty hour. Memory is bounded by the window
 * (samples per consumer) and `MAX_CONSUMERS`.
 */
import type { EventStore } from '../core/eventStore.js';
import type { EventFilter } from '../core/filter.js';

/** How far back the samples go. */
export const LAG_WINDOW_MS = 60 * 60 * 1000;
/** Consumers sampled; past this many, the first ones by name are kept. */
export const MAX_CONSUMERS = 1000;

/** One sample: `[time in ms since the epoch, lag in events]`. */
export type LagSample = [number, number];

export interface ConsumerLagHistory {
  name: string;
  filter: EventFilter;
  samples: LagSample[];
}

export class LagHistory {
  private readonly series = new Map<string, ConsumerLagHistory>();
  private readonly capacity: number;
  private timer: NodeJS.Timeout | null = null;
  private sampling: Promise<void> | null = null;

  constructor(
    private readonly store: EventStore,
    readonly intervalMs: number,
    private readonly onError: (err: unknown) => void,
  ) {
    this.capacity = Math.ceil(LAG_WINDOW_MS / intervalMs) + 1;
  }

  /** Takes a sample now and then every `intervalMs`, until `stop()`. */
  start(): void {
    if (this.timer) return;
    void this.sample();
    this.timer = setInterval(() => void this.sample(), this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.sampling;
  }

  /** One sample of every consumer's lag; a sample already running is not doubled. */
  sample(now = Date.now()): Promise<void> {
    this.sampling ??= this.take(now).finally(() => (this.sampling = null));
    return this.sampling;
  }

  private async take(now: number): Promise<void> {
    let consumers;
    try {
      consumers = await this.store.consumers.list();
    } catch (err) {
      this.onError(err);
      return;
    }
    const kept = consumers
      .filter((c) => !c.error)
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
      .slice(0, MAX_CONSUMERS);
    const seen = new Set<string>();
    for (const c of kept) {
      seen.add(c.name);
      let s = this.series.get(c.name);
      if (!s) {
        s = { name: c.name, filter: c.filter, samples: [] };
        this.series.set(c.name, s);
      }
      s.filter = c.filter;
      s.samples.push([now, c.lag]);
      if (s.samples.length > this.capacity) s.samples.splice(0, s.samples.length - this.capacity);
    }
    // A deleted consumer's history goes with it.
    for (const name of this.series.keys()) if (!seen.has(name)) this.series.delete(name);
    const oldest = now - LAG_WINDOW_MS;
    for (const s of this.series.values()) {
      const drop = s.samples.findIndex((x) => x[0] >= oldest);
      if (drop > 0) s.samples.splice(0, drop);
    }
  }

  /** Every consumer's samples, oldest first, or one consumer's (empty when it has none). */
  list(consumer?: string): ConsumerLagHistory[] {
    if (consumer !== undefined) {
      const s = this.series.get(consumer);
      return s ? [s] : [];
    }
    return [...this.series.values()];
  }
}
