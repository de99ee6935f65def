import type { ConsumerTarget } from '../core/consumerTarget.js';
import { IdemError, InvalidInputError } from '../core/errors.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';
import type { EffectHandlers } from '../effects/dispatcher.js';
import type { SqliteTarget } from '../sqlite/target.js';
import { sqliteBackend, type VerifyBackend } from './backend.js';
import {
  STATEMENTS,
  type Counterexample,
  type ScenarioResult,
  type StatementResult,
  type VerifyReport,
} from './checklist.js';
import { compareWithClean, dispatchFindings, lostFacts, measuredFindings, type Finding } from './checks.js';
import {
  checkSamples,
  consumerFilter,
  deriveHistory,
  MAX_SEED,
  randomSeed,
  type Derivation,
} from './derive.js';
import { settleIds, type HistoryEvent, type TestEvent } from './history.js';
import { poison } from './poisonScenario.js';
import { rebuild } from './rebuildScenario.js';
import { clean, SCENARIOS, type CleanFacts, type Scenario, type StatementId } from './scenarios.js';
import type { RunOutcome } from './session.js';
import { shrinkList } from './shrink.js';
import type { ConsumerFactory, StateReader, Subject } from './subject.js';

export interface VerifyConsumerOptions<T extends ConsumerTarget<unknown> = SqliteTarget> {
  /** `(source, target, { version }) => createConsumer({...})`: the consumer under test, not started. */
  consumer: ConsumerFactory<T>;
  /** The consumer's output as JSON, read from the target (of `version`). */
  read: StateReader<T>;
  /** The history to feed, in order (or a function returning it). At most 100,000 events. Give this or `samples`. */
  events?: readonly TestEvent[] | (() => Iterable<TestEvent>);
  /**
   * Instead of `events`: examples of the events the consumer reads (at most 10,000). The testkit
   * derives a history from those the consumer's filter matches, with fast-check: several entities
   * per sample stream, versions in order per entity, types and data from the samples.
   */
  samples?: readonly TestEvent[];
  /** With `samples`: the seed of the derived history (the report gives the one used, to replay a run). @default random */
  seed?: number;
  /** Effect handlers the spy dispatcher calls after recording each call. @default record only */
  effects?: EffectHandlers;
  /** Where scenarios run. @default `sqliteBackend()` (temporary SQLite files) */
  backend?: VerifyBackend<T>;
  /** Scenario runs spent shrinking each failing statement's input (0: report the whole history). @default 40 */
  shrinkRuns?: number;
  /** Longest wait for one consumer run to catch up, in ms (1000-600000). @default 60000 */
  timeoutMs?: number;
}

const OPTION_KEYS = {
  consumer: true,
  read: true,
  events: true,
  samples: true,
  seed: true,
  effects: true,
  backend: true,
  shrinkRuns: true,
  timeoutMs: true,
} as const satisfies KnownKeys<VerifyConsumerOptions>;

const MAX_EVENTS = 100_000;
const MAX_SHRINK_RUNS = 1000;

/** Every scenario after the clean run, in report order. */
const ALL: readonly Scenario[] = [...SCENARIOS, poison, rebuild];

/**
 * Runs the consumer against the production checklist of the idempotent-consumer pattern: a clean
 * single delivery gives the expected state, then each fault scenario runs on a fresh store and target
 * and must end in that state, with every effect dispatched exactly once. A statement that fails
 * comes with the smallest history found that still fails it, and the state difference.
 */
export async function verifyConsumer<T extends ConsumerTarget<unknown> = SqliteTarget>(
  options: VerifyConsumerOptions<T>,
): Promise<VerifyReport> {
  const started = Date.now();
  const { subject, given, shrinkRuns } = resolve(options);
  let derived: Derivation | undefined;
  let history: HistoryEvent[];
  if (given.kind === 'events') history = settleIds(given.events);
  else {
    const filter = await consumerFilter(subject);
    const d = await deriveHistory(given.samples, filter, given.seed);
    history = settleIds(d.events);
    derived = d.derivation;
  }
  const expected = await runClean(subject, history);
  const facts = factsOf(expected);
  const findings: Finding[] = [...lostFacts(expected), ...dispatchFindings('clean', expected.effects)];
  const scenarios: ScenarioResult[] = [
    {
      id: 'clean',
      title: clean.title,
      outcome: findings.length > 0 ? 'failed' : 'ok',
      ms: Date.now() - started,
      notes: [...expected.notes, ...findings.map((f) => f.message)],
    },
  ];
  for (const sc of ALL) {
    const t0 = Date.now();
    const skip = sc.skip?.(facts) ?? null;
    if (skip) {
      scenarios.push({ id: sc.id, title: sc.title, outcome: 'skipped', ms: 0, notes: [skip] });
      continue;
    }
    const { found, run } = await check(sc, subject, history, expected);
    if (sc.id === 'twice' && run) found.push(...measuredFindings(run, expected));
    findings.push(...found);
    scenarios.push({
      id: sc.id,
      title: sc.title,
      outcome: found.length > 0 ? 'failed' : 'ok',
      ms: Date.now() - t0,
      notes: [...(run?.notes ?? []), ...found.map((f) => f.message)],
    });
  }
  const statements: StatementResult[] = [];
  for (const s of STATEMENTS) {
    const first = findings.find((f) => f.statement === s.id);
    const bearing = [clean, ...ALL].filter((sc) => sc.statement === s.id).map((sc) => sc.id);
    if (!first) {
      statements.push({ id: s.id, statement: s.text, verdict: 'holds', scenarios: bearing });
      continue;
    }
    const failure = await counterexample(first, subject, history, shrinkRuns);
    statements.push({ id: s.id, statement: s.text, verdict: 'fails', scenarios: bearing, failure });
  }
  return {
    ok: statements.every((s) => s.verdict === 'holds'),
    consumer: facts.name,
    backend: subject.backend.name,
    events: history.length,
    ...(derived ? { derived } : {}),
    statements,
    scenarios,
    elapsedMs: Date.now() - started,
  };
}

function resolve<T extends ConsumerTarget<unknown>>(
  options: VerifyConsumerOptions<T>,
): { subject: Subject<T>; given: Given; shrinkRuns: number } {
  checkKnownKeys(options, OPTION_KEYS, 'options');
  if (typeof options.consumer !== 'function')
    throw new InvalidInputError('consumer', 'must be a function (source, target, deployment) => Consumer');
  if (typeof options.read !== 'function')
    throw new InvalidInputError('read', 'must be a function (target, deployment) => state');
  const given = history(options);
  const timeoutMs = options.timeoutMs ?? 60_000;
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1000 || timeoutMs > 600_000)
    throw new InvalidInputError('timeoutMs', 'must be an integer from 1000 to 600000');
  const shrinkRuns = options.shrinkRuns ?? 40;
  if (!Number.isSafeInteger(shrinkRuns) || shrinkRuns < 0 || shrinkRuns > MAX_SHRINK_RUNS)
    throw new InvalidInputError('shrinkRuns', `must be an integer from 0 to ${MAX_SHRINK_RUNS}`);
  const backend = options.backend ?? (sqliteBackend() as unknown as VerifyBackend<T>);
  return {
    subject: { consumer: options.consumer, read: options.read, effects: options.effects, backend, timeoutMs },
    given,
    shrinkRuns,
  };
}

/** The history as given (`events`), or what to derive it from (`samples`, `seed`). */
type Given =
  | { kind: 'events'; events: readonly TestEvent[] }
  | { kind: 'samples'; samples: readonly TestEvent[]; seed: number };

function history<T extends ConsumerTarget<unknown>>(options: VerifyConsumerOptions<T>): Given {
  if (options.events === undefined && options.samples === undefined)
    throw new InvalidInputError(
      'events',
      'is missing, and so is samples: give events (the history to feed) or samples (example events the testkit derives a history from)',
    );
  if (options.events !== undefined && options.samples !== undefined)
    throw new InvalidInputError('samples', 'must not be given with events: give one of the two');
  if (options.samples !== undefined) {
    const seed = options.seed ?? randomSeed();
    if (!Number.isSafeInteger(seed) || seed < 0 || seed > MAX_SEED)
      throw new InvalidInputError('seed', `must be an integer from 0 to ${MAX_SEED}`);
    return { kind: 'samples', samples: checkSamples(options.samples), seed };
  }
  if (options.seed !== undefined)
    throw new InvalidInputError('seed', 'only applies with samples (events are fed as given)');
  const events = typeof options.events === 'function' ? [...options.events()] : options.events;
  if (!Array.isArray(events))
    throw new InvalidInputError('events', 'must be a list of events (or a function returning one)');
  if (events.length === 0) throw new InvalidInputError('events', 'must hold at least one event');
  if (events.length > MAX_EVENTS)
    throw new InvalidInputError('events', `must hold at most ${MAX_EVENTS} events`);
  events.forEach((e: TestEvent, i) => {
    if (!e || typeof e.stream !== 'string' || typeof e.type !== 'string')
      throw new InvalidInputError(`events[${i}]`, 'must have a string stream and type');
  });
  return { kind: 'events', events };
}

async function runClean<T extends ConsumerTarget<unknown>>(
  subject: Subject<T>,
  history: readonly HistoryEvent[],
): Promise<RunOutcome> {
  try {
    return await clean.run(subject, history, { delivered: [], entityVersions: false });
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new IdemError(
      'invalid_input',
      `the consumer fails on a single clean delivery: ${message}`,
      {},
      { cause: err },
    );
  }
}

function factsOf(clean: RunOutcome): CleanFacts & { name: string } {
  const first = clean.metrics?.consumer ?? 'unknown';
  return {
    name: first,
    delivered: clean.delivered,
    entityVersions: clean.records.some((r) => r.versions.size > 0),
  };
}

/** Runs one scenario and compares it with the clean run; a run that throws is a finding too. */
async function check<T extends ConsumerTarget<unknown>>(
  sc: Scenario,
  subject: Subject<T>,
  history: readonly HistoryEvent[],
  expected: RunOutcome,
): Promise<{ found: Finding[]; run: RunOutcome | null }> {
  try {
    const run = await sc.run(subject, history, factsOf(expected));
    return { found: compareWithClean(sc.id, sc.statement, run, expected), run };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return {
      found: [
        { statement: sc.statement, scenario: sc.id, message: `the run failed: ${message}`, difference: [] },
      ],
      run: null,
    };
  }
}

/** Whether `history` still disproves `statement` through `scenario` (with its own clean run). */
async function stillFails<T extends ConsumerTarget<unknown>>(
  f: Finding,
  subject: Subject<T>,
  history: readonly HistoryEvent[],
): Promise<Finding | null> {
  let expected: RunOutcome;
  try {
    expected = await clean.run(subject, history, { delivered: [], entityVersions: false });
  } catch {
    return null;
  }
  const is = (x: Finding): boolean => x.statement === f.statement;
  if (f.scenario === 'clean')
    return [...lostFacts(expected), ...dispatchFindings('clean', expected.effects)].find(is) ?? null;
  const sc = ALL.find((s) => s.id === f.scenario)!;
  if (sc.skip?.(factsOf(expected))) return null;
  const { found, run } = await check(sc, subject, history, expected);
  if (sc.id === 'twice' && run) found.push(...measuredFindings(run, expected));
  return found.find(is) ?? null;
}

async function counterexample<T extends ConsumerTarget<unknown>>(
  first: Finding,
  subject: Subject<T>,
  history: HistoryEvent[],
  maxRuns: number,
): Promise<Counterexample> {
  let last = first;
  const shrunk = await shrinkList(
    history,
    async (candidate) => {
      const f = await stillFails(first, subject, candidate);
      if (f) last = f;
      return f !== null;
    },
    maxRuns,
  );
  // The finding of the smallest input: re-run once when the last failing run was a larger candidate.
  const final =
    shrunk.items.length === history.length
      ? first
      : ((await stillFails(first, subject, shrunk.items)) ?? last);
  return {
    scenario: final.scenario,
    message: final.message,
    events: shrunk.items,
    shrink: { from: history.length, runs: shrunk.runs, minimal: shrunk.minimal },
    difference: final.difference,
  };
}

export type { StatementId };
