import type { ScenarioId, StatementId } from './scenarios.js';
import type { StateDifference } from './stateDiff.js';
import type { Derivation } from './derive.js';
import type { TestEvent } from './history.js';

/** The production checklist of the idempotent-consumer pattern, in its order. */
export const STATEMENTS: readonly { id: StatementId; text: string }[] = [
  { id: 'stable-keys', text: 'Every effect has a stable deduplication key' },
  { id: 'atomic-commit', text: 'Output and processed marker commit atomically' },
  { id: 'ack-after-processing', text: 'Cursor acknowledgement follows durable processing' },
  { id: 'gaps-and-duplicates', text: 'Per-entity gaps and duplicates have an explicit policy' },
  { id: 'measured', text: 'Repeat delivery and checkpoint lag are measured' },
];

/** The smallest input found that still disproves a statement. */
export interface Counterexample {
  scenario: ScenarioId;
  message: string;
  /** The events, in order, as `verifyConsumer` takes them. */
  events: TestEvent[];
  /** The history had `from` events; shrinking kept `events.length` in `runs` scenario runs. */
  shrink: { from: number; runs: number; minimal: boolean };
  /** Expected (clean run) against actual end state, on `events`. */
  difference: StateDifference[];
}

export interface StatementResult {
  id: StatementId;
  statement: string;
  verdict: 'holds' | 'fails';
  /** The scenarios whose runs bear on the statement. */
  scenarios: ScenarioId[];
  failure?: Counterexample;
}

export interface ScenarioResult {
  id: ScenarioId;
  title: string;
  /** `skipped` with the reason in `notes` when it does not apply to this consumer. */
  outcome: 'ok' | 'failed' | 'skipped';
  ms: number;
  notes: string[];
}

export interface VerifyReport {
  /** True when every statement holds. */
  ok: boolean;
  consumer: string;
  backend: string;
  events: number;
  /** Set when the history was derived from `samples`: its seed replays it (option `seed`, CLI `--seed`). */
  derived?: Derivation;
  statements: StatementResult[];
  scenarios: ScenarioResult[];
  elapsedMs: number;
}
