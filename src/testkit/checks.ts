import type { RecordedEvent } from '../core/event.js';
import { effectIdentities, type EffectLog } from './effectSpy.js';
import type { ScenarioId, StatementId } from './scenarios.js';
import type { RunOutcome } from './session.js';
import { canonical, diffStates, type StateDifference } from './stateDiff.js';

/** One way a run disproved a statement. */
export interface Finding {
  statement: StatementId;
  scenario: ScenarioId;
  message: string;
  /** Where the run's end state differs from the clean run's (empty when the state is not the point). */
  difference: StateDifference[];
}

/** Effects recorded and dispatched: each non-suppressed row called once, a suppressed one never. */
export function dispatchFindings(scenario: ScenarioId, effects: EffectLog): Finding[] {
  const wrong: string[] = [];
  for (const row of effects.rows) {
    const calls = effects.calls.get(row.idempotencyKey) ?? 0;
    const want = row.status === 'suppressed' ? 0 : 1;
    if (calls !== want) wrong.push(`${row.idempotencyKey} (${row.status}) dispatched ${calls} times`);
  }
  if (wrong.length === 0) return [];
  const shown = wrong.slice(0, 5).join('; ');
  return [finding('stable-keys', scenario, `effects not dispatched exactly once: ${shown}`)];
}

/** A run compared with the clean run: its end state, its outbox, its own violation. */
export function compareWithClean(
  scenario: ScenarioId,
  statement: StatementId,
  run: RunOutcome,
  clean: RunOutcome,
): Finding[] {
  const out: Finding[] = [];
  if (run.violation) out.push(finding(statement, scenario, run.violation));
  const difference = diffStates(clean.state, run.state);
  if (difference.length > 0)
    out.push({ statement, scenario, message: 'the end state differs from the clean run', difference });
  const want = effectIdentities(clean.effects.rows);
  const got = effectIdentities(run.effects.rows);
  const extra = got.filter((k) => !want.includes(k));
  const missing = want.filter((k) => !got.includes(k));
  if (extra.length > 0 || missing.length > 0) {
    const list = (l: string[]): string => l.slice(0, 3).join(', ');
    out.push(
      finding(
        'stable-keys',
        scenario,
        `the recorded effects differ from the clean run: ${extra.length} new (${list(extra)}), ${missing.length} missing (${list(missing)})`,
      ),
    );
  }
  out.push(...dispatchFindings(scenario, run.effects));
  return out;
}

/** Lost events named in a finding's message after the first; the rest are counted. */
const MORE_LOST_SHOWN = 5;

/**
 * In a single delivery of events with distinct ids, a key guard skips an event only when an earlier
 * one had the same key. That is right for one fact sent twice (a webhook delivered twice, a retried
 * command: the same stream, type, data and metadata) and wrong for two different facts: one of them
 * is lost. One finding names the first lost event and the positions of the next few.
 */
export function lostFacts(clean: RunOutcome): Finding[] {
  const keyed = new Set<number>();
  let anyKey = false;
  for (const r of clean.records)
    for (const e of r.entries) {
      keyed.add(e.position);
      anyKey = true;
    }
  if (!anyKey) return [];
  const handled: RecordedEvent[] = [];
  const lost: RecordedEvent[] = [];
  for (const e of clean.delivered) {
    if (keyed.has(e.position)) {
      handled.push(e);
      continue;
    }
    const same = handled.find(
      (h) =>
        h.stream === e.stream &&
        h.type === e.type &&
        sameJson(h.data, e.data) &&
        sameJson(h.metadata, e.metadata),
    );
    if (!same) lost.push(e);
  }
  const [first, ...rest] = lost;
  if (!first) return [];
  const shown = rest.slice(0, MORE_LOST_SHOWN).map((e) => e.position);
  const more =
    rest.length === 0
      ? ''
      : ` (and ${rest.length} more lost the same way, at positions ${shown.join(', ')}${rest.length > shown.length ? ', ...' : ''})`;
  return [
    finding(
      'stable-keys',
      'clean',
      `${first.type} at position ${first.position} (${first.stream} v${first.version}) was skipped as a duplicate, but no event with its content was handled: two different facts share a dedup key and one is lost${more}`,
    ),
  ];
}

/** Repeats are counted and the checkpoint is reported: the runtime's metrics after the repeated delivery. */
export function measuredFindings(run: RunOutcome, clean: RunOutcome): Finding[] {
  const m = run.metrics;
  if (!m) return [finding('measured', 'twice', 'the run ended without metrics')];
  const repeats = clean.delivered.length;
  const last = clean.delivered.at(-1)?.position ?? 0;
  const out: Finding[] = [];
  if (m.duplicates < repeats)
    out.push(
      finding('measured', 'twice', `${repeats} repeated deliveries, ${m.duplicates} counted as duplicates`),
    );
  if (m.position < last)
    out.push(finding('measured', 'twice', `checkpoint reported at ${m.position}, last handled ${last}`));
  return out;
}

function finding(statement: StatementId, scenario: ScenarioId, message: string): Finding {
  return { statement, scenario, message, difference: [] };
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}
