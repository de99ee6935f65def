import type { Random } from './random.js';

export type Size = 'quick' | 'full';

/** One row of the fault table. A scenario passes only with lost, doubled and outOfOrder all 0 (and no `error`). */
export interface ScenarioResult {
  name: string;
  /** Faults injected, e.g. `12 SIGKILL (4 handler, 3 after-commit, 3 ack, 2 timer)`. */
  faults: string;
  faultCount: number;
  /** Events the scenario wrote (and must find exactly once in the output). */
  events: number;
  /** Events delivered to consumers, redeliveries included (0 where no consumer is involved). */
  delivered: number;
  /** Redeliveries and retried appends recognised as duplicates and skipped. */
  duplicates: number;
  lost: number;
  doubled: number;
  /** Per-entity ordering violations (a version applied after a later one, or a version gap). */
  outOfOrder: number;
  /** Other figures worth printing (rates, latencies, statuses). */
  notes: string[];
  /** Set when the scenario could not complete; it fails. */
  error?: string;
  /** Set when it did not run (service unreachable); it neither passes nor fails. */
  skipped?: string;
  durationMs: number;
}

export function passed(r: ScenarioResult): boolean {
  return (
    r.skipped === undefined && r.error === undefined && r.lost === 0 && r.doubled === 0 && r.outOfOrder === 0
  );
}

export interface ScenarioContext {
  size: Size;
  seed: number;
  random: Random;
  /** A fresh directory for the scenario's files (removed afterwards). */
  dir: string;
  /** Progress lines (to stderr in the CLI). */
  log(message: string): void;
}

export type ScenarioBody = Omit<ScenarioResult, 'name' | 'durationMs'>;

export interface Scenario {
  name: string;
  /** What the scenario proves, one line (for the docs and --list). */
  proves: string;
  /** Needs PostgreSQL: skipped with a reason when it is unreachable (unless IDEM_REQUIRE_SERVICES=1). */
  postgres?: boolean;
  /** Needs NATS JetStream: skipped with a reason when it is unreachable (unless IDEM_REQUIRE_SERVICES=1). */
  nats?: boolean;
  run(ctx: ScenarioContext): Promise<ScenarioBody>;
}

/** Counts shared by scenarios; every field starts at 0. */
export function emptyBody(): ScenarioBody {
  return {
    faults: '',
    faultCount: 0,
    events: 0,
    delivered: 0,
    duplicates: 0,
    lost: 0,
    doubled: 0,
    outOfOrder: 0,
    notes: [],
  };
}
