/**
 * The monitors remote consumers report over their WebSocket (`report` frames), kept per consumer
 * and published on `/metrics` under the names an in-process consumer's registry uses
 * (`idem_consumer_duplicates_total{consumer}`, `idem_consumer_handler_seconds_bucket`, ...), so one
 * scrape shows the handler-side monitors of every consumer. Only the last report of each consumer
 * is kept; at most `MAX_REPORTED` consumers, the oldest report dropped first.
 */
import {
  LATENCY_BUCKETS,
  MONITOR_COUNTERS,
  MONITOR_GAUGES,
  MONITOR_HISTOGRAMS,
  type ConsumerMonitors,
  type LatencyHistogram,
} from '../core/consumerMonitors.js';

export const MAX_REPORTED = 10_000;
const PREFIX = 'idem_consumer_';

export interface ConsumerReport {
  consumer: string;
  /** ISO time the server received it. */
  reportedAt: string;
  monitors: ConsumerMonitors;
  /** duplicates / delivered, 0 when nothing was delivered. */
  repeatRate: number;
}

/** One Prometheus metric family: its header and sample lines. */
interface Family {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram';
  samples: string[];
}

export class ConsumerReports {
  private readonly reports = new Map<string, ConsumerReport>();

  record(consumer: string, monitors: ConsumerMonitors, now = new Date()): void {
    this.reports.delete(consumer);
    this.reports.set(consumer, {
      consumer,
      reportedAt: now.toISOString(),
      monitors,
      repeatRate: monitors.delivered ? monitors.duplicates / monitors.delivered : 0,
    });
    if (this.reports.size > MAX_REPORTED) {
      const oldest = this.reports.keys().next().value;
      if (oldest !== undefined) this.reports.delete(oldest);
    }
  }

  get(consumer: string): ConsumerReport | null {
    return this.reports.get(consumer) ?? null;
  }

  /** Drops a deleted consumer's report. */
  forget(consumer: string): void {
    this.reports.delete(consumer);
  }

  /**
   * Adds the reported series to `text` (Prometheus text format): into a family already there (an
   * in-process consumer's registry) or as a family of its own after the others.
   */
  render(text: string): string {
    if (this.reports.size === 0) return text;
    const ours = this.families();
    const lines = text.split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    const out: string[] = [];
    let current: string | null = null;
    const flush = (): void => {
      const f = current === null ? undefined : ours.get(current);
      if (f) {
        out.push(...f.samples);
        ours.delete(f.name);
      }
    };
    for (const line of lines) {
      const m = /^# HELP (\S+)/.exec(line);
      if (m) {
        flush();
        current = m[1]!;
      }
      out.push(line);
    }
    flush();
    for (const f of ours.values())
      out.push(`# HELP ${f.name} ${f.help}`, `# TYPE ${f.name} ${f.type}`, ...f.samples);
    return out.join('\n') + '\n';
  }

  private families(): Map<string, Family> {
    const out = new Map<string, Family>();
    const family = (suffix: string, help: string, type: Family['type']): Family => {
      const f: Family = { name: PREFIX + suffix, help, type, samples: [] };
      out.set(f.name, f);
      return f;
    };
    const counters = Object.entries(MONITOR_COUNTERS).map(
      ([key, [suffix, help]]) =>
        [key as keyof typeof MONITOR_COUNTERS, family(suffix, help, 'counter')] as const,
    );
    const histograms = Object.entries(MONITOR_HISTOGRAMS).map(
      ([key, [suffix, help]]) =>
        [key as keyof typeof MONITOR_HISTOGRAMS, family(suffix, help, 'histogram')] as const,
    );
    const lagEvents = family(...MONITOR_GAUGES.lagEvents, 'gauge');
    const lagSeconds = family(...MONITOR_GAUGES.lagSeconds, 'gauge');
    const parkedEntities = family(...MONITOR_GAUGES.parkedEntities, 'gauge');
    for (const r of this.reports.values()) {
      const label = `consumer="${escapeLabel(r.consumer)}"`;
      const m = r.monitors;
      for (const [key, f] of counters) f.samples.push(`${f.name}{${label}} ${m[key]}`);
      for (const [key, f] of histograms) f.samples.push(...histogramLines(f.name, label, m[key]));
      lagEvents.samples.push(`${lagEvents.name}{${label}} ${m.checkpointLag.events}`);
      lagSeconds.samples.push(`${lagSeconds.name}{${label}} ${m.checkpointLag.seconds}`);
      parkedEntities.samples.push(`${parkedEntities.name}{${label}} ${m.parkedEntities}`);
    }
    return out;
  }
}

function histogramLines(name: string, label: string, h: LatencyHistogram): string[] {
  const lines = LATENCY_BUCKETS.map((le, i) => `${name}_bucket{le="${le}",${label}} ${h.buckets[i] ?? 0}`);
  lines.push(`${name}_bucket{le="+Inf",${label}} ${h.count}`);
  lines.push(`${name}_sum{${label}} ${h.sum}`, `${name}_count{${label}} ${h.count}`);
  return lines;
}

/** A label value as the text format writes it: backslash, quote and newline escaped. */
function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}
