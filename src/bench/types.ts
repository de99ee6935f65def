/** Types shared by the benchmark harness and its scenarios. */

/** One line of the results table: an idem measurement (or a baseline) with its comparison. */
export interface BenchRow {
  /** The scenario it belongs to, e.g. `sqlite-append`. */
  scenario: string;
  /** What was measured, e.g. `1 event/call, 16 concurrent callers` or `baseline: 1 row/tx`. */
  shape: string;
  /** True for a baseline measured without idem. */
  baseline: boolean;
  events: number;
  seconds: number;
  eventsPerSec: number;
  /** The baseline this row is compared with, and its rate (measured in the same run). */
  baselineShape: string | null;
  baselineEventsPerSec: number | null;
  /** eventsPerSec / baselineEventsPerSec. */
  ratio: number | null;
  /** The target for this row, in words, e.g. `>= 10x baseline`. */
  target: string | null;
  /** Whether the target was met; null when the row has no target. */
  met: boolean | null;
  /** Other figures: latency percentiles (`p50Ms`, `p95Ms`, `p99Ms`), `peakRssMb`, ... */
  extra: Record<string, number>;
}

export interface SkippedScenario {
  scenario: string;
  reason: string;
}

export interface BenchReport {
  /** ISO time the run started. */
  startedAt: string;
  mode: 'quick' | 'full';
  machine: {
    cpus: number;
    cpuModel: string;
    memoryGb: number;
    platform: string;
    node: string;
    /** How an idle CPU waits (Linux: `cpuidle haltpoll, polls up to 0 ns`); absent where unknown. */
    cpuIdle?: string;
  };
  scenarios: string[];
  rows: BenchRow[];
  skipped: SkippedScenario[];
  /** Scenarios that threw, with the error message (the run continues with the next one). */
  failed: SkippedScenario[];
  totalSeconds: number;
}

/** What a scenario gets from the harness. */
export interface ScenarioContext {
  quick: boolean;
  /**
   * The number of events for a measurement: `quick` or `full` by mode, times the run's scale, rounded
   * to a multiple of `multipleOf` (at least one multiple).
   */
  size(quick: number, full: number, multipleOf?: number): number;
  /**
   * How many times the scenarios that repeat their measurements (the append scenarios, and the
   * consumer scenarios' target rows with their baselines) measure each shape, interleaved; their
   * rows report the median. 1 in quick mode.
   */
  rounds: number;
  /** A fresh temporary directory, removed when the scenario ends. */
  tempDir(): Promise<string>;
  /** A fresh PostgreSQL database (dropped when the scenario ends); null-safe: only called when `needs` includes postgres. */
  postgresDatabase(): Promise<string>;
  /** Progress lines (stderr); never part of the results. */
  log(message: string): void;
}

export type Requirement = 'postgres';

export interface Scenario {
  name: string;
  /** One line saying what it measures. */
  description: string;
  needs: readonly Requirement[];
  /** Returns a reason when the scenario cannot run here (a missing module, ...), else null. */
  unavailable?(): Promise<string | null>;
  run(ctx: ScenarioContext): Promise<BenchRow[]>;
}
