/**
 * The handler-side monitors of a consumer (repeat rate, gaps, latencies, reconnects, checkpoint lag)
 * as one shape: what the runtime counts, what a remote consumer reports to its server in a `report`
 * frame, and the Prometheus families both publish under `idem_consumer_*`.
 */

/** Upper bounds (seconds) of the latency histograms' buckets; the last bucket is `+Inf`. */
export const LATENCY_BUCKETS: readonly number[] = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];

export type MonitorCounter =
  | 'delivered'
  | 'processed'
  | 'duplicates'
  | 'gaps'
  | 'recovered'
  | 'deadLetters'
  | 'parked'
  | 'reconnects'
  | 'batches';

/** Each counter's Prometheus name (after the prefix) and help text. */
export const MONITOR_COUNTERS: Record<MonitorCounter, [suffix: string, help: string]> = {
  delivered: ['delivered_total', 'Events delivered to the consumer, duplicates included'],
  processed: ['processed_total', 'Events handled and committed'],
  duplicates: ['duplicates_total', 'Delivered events skipped as already handled'],
  gaps: ['gaps_total', 'Entity version gaps seen'],
  recovered: ['recovered_total', 'Events read from the store to fill version gaps'],
  deadLetters: ['dead_letters_total', 'Events dead-lettered after their handler failed'],
  parked: ['parked_total', 'Events parked (dead letters and events parked behind them)'],
  reconnects: ['reconnects_total', 'Reconnects after a source or target failure'],
  batches: ['batches_total', 'Committed target transactions'],
};

export const MONITOR_HISTOGRAMS = {
  handlerSeconds: ['handler_seconds', 'Handler latency per event'],
  endToEndSeconds: ['end_to_end_seconds', 'From event recordedAt to the commit of its batch'],
} as const;

export const MONITOR_GAUGES = {
  lagEvents: ['checkpoint_lag_events', 'Events between the acknowledged position and the head'],
  lagSeconds: ['checkpoint_lag_seconds', 'Age of the checkpoint while behind the head'],
  parkedEntities: ['parked_entities', 'Entities parked behind a dead letter'],
} as const;

/** A latency histogram: `buckets[i]` counts observations at or below `LATENCY_BUCKETS[i]` (cumulative). */
export interface LatencyHistogram {
  count: number;
  /** Seconds, summed over the observations. */
  sum: number;
  /** The largest observation, in seconds. */
  max: number;
  buckets: number[];
}

/** A consumer's monitors, counted by its process since the consumer object was created. */
export type ConsumerMonitors = Record<MonitorCounter, number> & {
  parkedEntities: number;
  handlerSeconds: LatencyHistogram;
  endToEndSeconds: LatencyHistogram;
  checkpointLag: { events: number; seconds: number };
};
