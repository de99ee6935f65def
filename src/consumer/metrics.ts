import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import {
  LATENCY_BUCKETS,
  MONITOR_COUNTERS,
  MONITOR_GAUGES,
  MONITOR_HISTOGRAMS,
  type ConsumerMonitors,
  type LatencyHistogram,
  type MonitorCounter,
} from '../core/consumerMonitors.js';
import type { SourceMetrics } from '../core/consumerSource.js';
import type { ConsumerMetricsOptions } from './options.js';

/** Count, sum and largest value of a latency, in seconds. */
export interface LatencySummary {
  count: number;
  sumSeconds: number;
  maxSeconds: number;
  /** sumSeconds / count, 0 when empty. */
  meanSeconds: number;
}

/** What `consumer.metrics()` returns: counts since this consumer object was created. */
export interface ConsumerMetricsSnapshot {
  consumer: string;
  /** Events the source delivered (duplicates included). */
  delivered: number;
  /** Events the handler processed and the target committed. */
  processed: number;
  /** Delivered events skipped as already handled (by checkpoint, ledger key or entity version). */
  duplicates: number;
  /** duplicates / delivered, 0 when nothing was delivered. */
  repeatRate: number;
  /** Version gaps seen (entity-version guard). */
  gaps: number;
  /** Events read from the store to fill gaps and applied. */
  recovered: number;
  /** Events dead-lettered after their handler failed. */
  deadLetters: number;
  /** Events parked: dead letters plus the later events of their entities parked behind them. */
  parked: number;
  /** Entities this consumer parked and has not seen redelivered and handled since. */
  parkedEntities: number;
  /** Source reconnects after a failure. */
  reconnects: number;
  /** Committed target transactions. */
  batches: number;
  handlerLatency: LatencySummary;
  /** From the event's `recordedAt` to the commit of its batch. */
  endToEndLatency: LatencySummary;
  /** True while the consumer is paused (by an operator, or by itself in an outage). */
  paused: boolean;
  /** Last acknowledged position. */
  position: number;
  /** The source's head position when last checked. */
  head: number;
  /** Events between the acknowledged position and the head (an upper bound under a filter), and the age of the checkpoint. */
  checkpointLag: { events: number; seconds: number };
  /** The source's own delivery figures, for a source that reports them (`jetStreamSource`: pending, ack-pending, redelivered...). */
  source?: SourceMetrics;
}

/** Where the consumer is: kept by the runtime, shown by the metrics. */
export interface ConsumerProgress {
  /** Last acknowledged position. */
  readonly position: number;
  /** The source's head when last seen; never below `position`. */
  readonly head: number;
  /** Age of the checkpoint while behind the head, else 0. */
  readonly lagSeconds: number;
}

class Latency {
  count = 0;
  sum = 0;
  max = 0;
  /** Observations per bucket of `LATENCY_BUCKETS` (not cumulative); beyond the last bound, none. */
  private readonly perBucket = new Array<number>(LATENCY_BUCKETS.length).fill(0);
  add(seconds: number): void {
    this.count++;
    this.sum += seconds;
    if (seconds > this.max) this.max = seconds;
    const i = LATENCY_BUCKETS.findIndex((b) => seconds <= b);
    if (i >= 0) this.perBucket[i]!++;
  }
  histogram(): LatencyHistogram {
    let total = 0;
    const buckets = this.perBucket.map((n) => (total += n));
    return { count: this.count, sum: this.sum, max: this.max, buckets };
  }
  summary(): LatencySummary {
    return {
      count: this.count,
      sumSeconds: this.sum,
      maxSeconds: this.max,
      meanSeconds: this.count ? this.sum / this.count : 0,
    };
  }
}

function metric<T>(registry: Registry, name: string, make: () => T): T {
  // A registry shared by several consumers holds one metric per name, labelled by consumer.
  return (registry.getSingleMetric(name) as T | undefined) ?? make();
}

/** The consumer's counters and latencies, mirrored into a prom-client registry when one is given. */
export class ConsumerMetrics {
  private readonly counts: Record<MonitorCounter, number> = {
    delivered: 0,
    processed: 0,
    duplicates: 0,
    gaps: 0,
    recovered: 0,
    deadLetters: 0,
    parked: 0,
    reconnects: 0,
    batches: 0,
  };
  private readonly handler = new Latency();
  private readonly endToEnd = new Latency();
  /** Entities this consumer parked and has not handled since. */
  private readonly parkedStreams = new Set<string>();
  private isPaused = false;
  private readonly prom: {
    counters: Record<MonitorCounter, Counter<'consumer'>>;
    handler: Histogram<'consumer'>;
    endToEnd: Histogram<'consumer'>;
    lagEvents: Gauge<'consumer'>;
    lagSeconds: Gauge<'consumer'>;
    parkedEntities: Gauge<'consumer'>;
    position: Gauge<'consumer'>;
    paused: Gauge<'consumer'>;
    source: Gauge<'consumer' | 'figure'>;
  } | null;

  constructor(
    private readonly consumer: string,
    options: ConsumerMetricsOptions | undefined,
  ) {
    if (!options) {
      this.prom = null;
      return;
    }
    const { registry } = options;
    const p = options.prefix ?? 'idem_consumer_';
    const labelNames = ['consumer'] as const;
    const registers = [registry];
    const counters = {} as Record<MonitorCounter, Counter<'consumer'>>;
    for (const key of Object.keys(MONITOR_COUNTERS) as MonitorCounter[]) {
      const [suffix, help] = MONITOR_COUNTERS[key];
      counters[key] = metric(
        registry,
        p + suffix,
        () => new Counter({ name: p + suffix, help, labelNames, registers }),
      );
    }
    const gauge = (suffix: string, help: string): Gauge<'consumer'> =>
      metric(registry, p + suffix, () => new Gauge({ name: p + suffix, help, labelNames, registers }));
    const histogram = (suffix: string, help: string): Histogram<'consumer'> =>
      metric(
        registry,
        p + suffix,
        () => new Histogram({ name: p + suffix, help, labelNames, registers, buckets: [...LATENCY_BUCKETS] }),
      );
    this.prom = {
      counters,
      handler: histogram(...MONITOR_HISTOGRAMS.handlerSeconds),
      endToEnd: histogram(...MONITOR_HISTOGRAMS.endToEndSeconds),
      lagEvents: gauge(...MONITOR_GAUGES.lagEvents),
      lagSeconds: gauge(...MONITOR_GAUGES.lagSeconds),
      parkedEntities: gauge(...MONITOR_GAUGES.parkedEntities),
      position: gauge('position', 'Last acknowledged position'),
      paused: gauge('paused', '1 while the consumer is paused (by an operator or by an outage), else 0'),
      source: metric(
        registry,
        `${p}source`,
        () =>
          new Gauge({
            name: `${p}source`,
            help: "The source's own delivery figures (jetStreamSource: pending, ackPending, redelivered...)",
            labelNames: ['consumer', 'figure'],
            registers,
          }),
      ),
    };
  }

  add(name: MonitorCounter, n = 1): void {
    if (n === 0) return;
    this.counts[name] += n;
    this.prom?.counters[name].inc({ consumer: this.consumer }, n);
  }

  handlerSeconds(seconds: number): void {
    this.handler.add(seconds);
    this.prom?.handler.observe({ consumer: this.consumer }, seconds);
  }

  endToEndSeconds(seconds: number): void {
    this.endToEnd.add(seconds);
    this.prom?.endToEnd.observe({ consumer: this.consumer }, seconds);
  }

  /** Entities handled no longer count as parked; `parked` ones now do. */
  entities(handled: readonly string[], parked: readonly string[]): void {
    if (this.parkedStreams.size > 0) for (const s of handled) this.parkedStreams.delete(s);
    for (const s of parked) this.parkedStreams.add(s);
  }

  paused(flag: boolean): void {
    this.isPaused = flag;
    this.prom?.paused.set({ consumer: this.consumer }, flag ? 1 : 0);
  }

  /** Sets the position, lag and parked-entity gauges from the runtime's progress, and the source's figures. */
  gauges(p: ConsumerProgress, source?: SourceMetrics): void {
    if (!this.prom) return;
    const labels = { consumer: this.consumer };
    if (source)
      for (const [figure, value] of Object.entries(source))
        this.prom.source.set({ consumer: this.consumer, figure }, value);
    this.prom.position.set(labels, p.position);
    this.prom.lagEvents.set(labels, p.head - p.position);
    this.prom.lagSeconds.set(labels, p.lagSeconds);
    this.prom.parkedEntities.set(labels, this.parkedStreams.size);
  }

  /** The monitors as a remote consumer reports them to its server. */
  monitors(p: ConsumerProgress): ConsumerMonitors {
    return {
      ...this.counts,
      parkedEntities: this.parkedStreams.size,
      handlerSeconds: this.handler.histogram(),
      endToEndSeconds: this.endToEnd.histogram(),
      checkpointLag: { events: Math.max(0, p.head - p.position), seconds: p.lagSeconds },
    };
  }

  /** The counts, with the runtime's progress. */
  snapshot(p: ConsumerProgress): ConsumerMetricsSnapshot {
    const c = this.counts;
    return {
      consumer: this.consumer,
      ...c,
      repeatRate: c.delivered ? c.duplicates / c.delivered : 0,
      parkedEntities: this.parkedStreams.size,
      handlerLatency: this.handler.summary(),
      endToEndLatency: this.endToEnd.summary(),
      paused: this.isPaused,
      position: p.position,
      head: p.head,
      checkpointLag: { events: Math.max(0, p.head - p.position), seconds: p.lagSeconds },
    };
  }
}
