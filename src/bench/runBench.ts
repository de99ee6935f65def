import { InvalidInputError } from '../core/errors.js';
import { machineInfo } from './machine.js';
import { DEFAULT_POSTGRES_URL, BenchResources, flushDirtyPages } from './resources.js';
import { SCENARIOS } from './scenarios/index.js';
import type { BenchReport, Scenario, ScenarioContext } from './types.js';

export interface BenchOptions {
  /** Small sizes (the whole run under a minute) for CI. @default false */
  quick?: boolean;
  /** Multiplies every size (tests use a tiny scale to check that the bench runs). @default 1 */
  scale?: number;
  /** Rounds of the scenarios that repeat their measurements (each shape's median is reported). @default 3, 1 with `quick` */
  rounds?: number;
  /** Run only these scenarios (by name). @default all */
  only?: readonly string[];
  /** The PostgreSQL server for the PostgreSQL scenarios; a database with a random name is created and dropped. */
  postgresUrl?: string;
  /** On SIGINT/SIGTERM, remove temporary files and databases, then exit (for command-line runs). @default false */
  handleSignals?: boolean;
  /** Progress lines. @default none */
  log?: (message: string) => void;
}

/** Names of every scenario, in run order. */
export function benchScenarioNames(): string[] {
  return SCENARIOS.map((s) => s.name);
}

/**
 * Runs the benchmark scenarios, each with its baselines measured in the same run, and returns the
 * report. Never leaves temporary files or databases behind. A scenario that throws is reported in
 * `failed` and the run goes on.
 */
export async function runBench(options: BenchOptions = {}): Promise<BenchReport> {
  const started = Date.now();
  const quick = options.quick ?? false;
  const log = options.log ?? ((): void => undefined);
  const selected = selectScenarios(options.only);
  const resources = new BenchResources(
    options.postgresUrl ?? process.env.IDEM_PG_URL ?? process.env.IDEM_POSTGRES_URL ?? DEFAULT_POSTGRES_URL,
  );
  const report: BenchReport = {
    startedAt: new Date(started).toISOString(),
    mode: quick ? 'quick' : 'full',
    machine: machineInfo(),
    scenarios: selected.map((s) => s.name),
    rows: [],
    skipped: [],
    failed: [],
    totalSeconds: 0,
  };
  const scale = options.scale ?? 1;
  if (!(scale > 0 && scale <= 10)) throw new InvalidInputError('scale', 'must be a number > 0 and <= 10');
  const rounds = options.rounds ?? (quick ? 1 : 3);
  if (!(Number.isInteger(rounds) && rounds >= 1 && rounds <= 20))
    throw new InvalidInputError('rounds', 'must be a whole number from 1 to 20');
  const ctx: ScenarioContext = {
    quick,
    rounds,
    size: (q, full, multipleOf = 1) =>
      Math.max(1, Math.round(((quick ? q : full) * scale) / multipleOf)) * multipleOf,
    tempDir: () => resources.tempDir(),
    postgresDatabase: () => resources.postgresDatabase(),
    log,
  };
  let postgresReason: string | null | undefined;
  // Ctrl-C or a kill must not leave databases behind: clean up, then exit as the signal would.
  let interrupted = false;
  const onSignal = (sig: NodeJS.Signals): void => {
    log(`${sig}: cleaning up`);
    interrupted = true;
    // The scenario under way may still try to create things: refused from now on, so that this
    // cleanup is the last word.
    resources.close();
    void resources.cleanup().finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
  };
  if (options.handleSignals) {
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  }
  try {
    for (const scenario of selected) {
      if (interrupted) break;
      if (scenario.needs.includes('postgres')) {
        postgresReason ??= await resources.postgresUnavailable();
        if (postgresReason) {
          report.skipped.push({ scenario: scenario.name, reason: postgresReason });
          log(`skipped ${scenario.name}: ${postgresReason}`);
          continue;
        }
      }
      const missing = (await scenario.unavailable?.()) ?? null;
      if (missing) {
        report.skipped.push({ scenario: scenario.name, reason: missing });
        log(`skipped ${scenario.name}: ${missing}`);
        continue;
      }
      const t0 = Date.now();
      try {
        report.rows.push(...(await scenario.run(ctx)));
        log(`${scenario.name}: done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      } catch (err) {
        const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
        report.failed.push({ scenario: scenario.name, reason: message });
        log(`FAILED ${scenario.name}: ${err instanceof Error ? (err.stack ?? message) : message}`);
      }
      // Each scenario's files and databases go before the next one starts, and so do the OS's
      // dirty pages, so that no scenario pays for an earlier one's data: PostgreSQL's background
      // work on databases kept to the end of the run (checkpoint writes, autovacuum) and the
      // kernel's writeback compete with later scenarios (the live latency's p99 after the consumer
      // scenarios is several times its p99 once their databases are dropped).
      for (const problem of await resources.cleanup()) log(`cleanup: ${problem}`);
      const flushed = await flushDirtyPages();
      if (flushed !== null) log(`${scenario.name}: flushed the OS's dirty pages in ${flushed.toFixed(1)} s`);
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    for (const problem of await resources.cleanup()) log(`cleanup: ${problem}`);
  }
  report.totalSeconds = (Date.now() - started) / 1000;
  return report;
}

function selectScenarios(only: readonly string[] | undefined): Scenario[] {
  if (!only || only.length === 0) return [...SCENARIOS];
  const unknown = only.filter((n) => !SCENARIOS.some((s) => s.name === n));
  if (unknown.length > 0) {
    throw new InvalidInputError(
      'only',
      `must name known scenarios (${benchScenarioNames().join(', ')}); got ${unknown.join(', ')}`,
    );
  }
  return SCENARIOS.filter((s) => only.includes(s.name));
}
