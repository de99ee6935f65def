import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { BenchRow } from './types.js';

export interface Timed {
  events: number;
  seconds: number;
  eventsPerSec: number;
}

/** A measurement repeated in rounds: the median round, with the slowest and fastest rates. */
export interface Rounds extends Timed {
  rounds: number;
  minEventsPerSec: number;
  maxEventsPerSec: number;
}

/** One shape measured by `inRounds`: its number of events and how to measure it on `events` events. */
export interface RoundShape {
  events: number;
  run: (events: number) => Promise<Timed>;
  /** Events of its untimed warm-up. @default a tenth of `events` */
  warmUpEvents?: number;
}

/**
 * Measures every shape `rounds` times, interleaved (each shape once per round, in the given order),
 * and returns for each shape its median round by rate. With `warmUp` (the default) and more than
 * one round, each shape first runs once untimed (on a tenth of its events unless it says how many),
 * so that the JIT has compiled idem's and the baselines' code before anything is timed.
 * Interleaving spreads a slow spell of a shared machine over every shape instead of one, so that
 * ratios between shapes hold better than single runs'.
 */
export async function inRounds<K extends string>(
  rounds: number,
  shapes: Record<K, RoundShape>,
  { log = () => undefined, warmUp = true }: { log?: (message: string) => void; warmUp?: boolean } = {},
): Promise<Record<K, Rounds>> {
  const keys = Object.keys(shapes) as K[];
  if (warmUp && rounds > 1) {
    log(`warm-up: ${keys.join(', ')}`);
    for (const k of keys)
      await shapes[k].run(shapes[k].warmUpEvents ?? Math.max(1, Math.round(shapes[k].events / 10)));
  }
  const runs = new Map<K, Timed[]>(keys.map((k) => [k, []]));
  for (let r = 1; r <= rounds; r++) {
    for (const k of keys) {
      if (rounds > 1) log(`round ${r}/${rounds}: ${k} (${shapes[k].events})`);
      else log(`${k} (${shapes[k].events})`);
      runs.get(k)!.push(await shapes[k].run(shapes[k].events));
    }
  }
  const out = {} as Record<K, Rounds>;
  for (const k of keys) {
    const sorted = [...runs.get(k)!].sort((a, b) => a.eventsPerSec - b.eventsPerSec);
    out[k] = {
      ...sorted[(sorted.length - 1) >> 1]!,
      rounds: sorted.length,
      minEventsPerSec: sorted[0]!.eventsPerSec,
      maxEventsPerSec: sorted[sorted.length - 1]!.eventsPerSec,
    };
  }
  return out;
}

/** The extra figures of a measurement made in more than one round (its range), else none. */
function roundsExtra(measured: Timed): Record<string, number> {
  if (!('rounds' in measured)) return {};
  const m = measured as Rounds;
  if (m.rounds < 2) return {};
  return {
    rounds: m.rounds,
    minEventsPerSec: Math.round(m.minEventsPerSec),
    maxEventsPerSec: Math.round(m.maxEventsPerSec),
  };
}

/**
 * V8's full garbage collection, made available without starting node with `--expose-gc`: the flag
 * is set, and a new context (which reads it when created) hands out its `gc`.
 */
const collectGarbage: () => void = (() => {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
})();

/**
 * Runs `fn` and returns how long it took, with the rate for `events`. A full garbage collection runs
 * first, so that what the scenario built before the clock started (its events, its rows: tens of MB)
 * is not collected on the measured code's time, which would differ from shape to shape and from run
 * to run.
 */
export async function timed(events: number, fn: () => Promise<void> | void): Promise<Timed> {
  collectGarbage();
  const start = process.hrtime.bigint();
  await fn();
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  return { events, seconds, eventsPerSec: events / seconds };
}

export interface RowSpec {
  scenario: string;
  shape: string;
  measured: Timed;
  /** Compare with this baseline row (its rate goes in the table). */
  against?: BenchRow;
  /** The target in words and whether it was met. */
  target?: { text: string; met: boolean };
  extra?: Record<string, number>;
}

/** A measurement of idem, compared with a baseline. */
export function row(spec: RowSpec): BenchRow {
  const base = spec.against ?? null;
  return {
    scenario: spec.scenario,
    shape: spec.shape,
    baseline: false,
    events: spec.measured.events,
    seconds: round(spec.measured.seconds, 3),
    eventsPerSec: Math.round(spec.measured.eventsPerSec),
    baselineShape: base ? base.shape.replace(/^baseline: /, '') : null,
    baselineEventsPerSec: base ? base.eventsPerSec : null,
    ratio: base ? round(spec.measured.eventsPerSec / base.eventsPerSec, 2) : null,
    target: spec.target?.text ?? null,
    met: spec.target?.met ?? null,
    extra: { ...roundsExtra(spec.measured), ...spec.extra },
  };
}

/** A baseline measurement (without idem). */
export function baselineRow(
  scenario: string,
  shape: string,
  measured: Timed,
  extra: Record<string, number> = {},
): BenchRow {
  return {
    scenario,
    shape: `baseline: ${shape}`,
    baseline: true,
    events: measured.events,
    seconds: round(measured.seconds, 3),
    eventsPerSec: Math.round(measured.eventsPerSec),
    baselineShape: null,
    baselineEventsPerSec: null,
    ratio: null,
    target: null,
    met: null,
    extra: { ...roundsExtra(measured), ...extra },
  };
}

export function round(n: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** The q-quantile (0..1) of sorted numbers, nearest-rank. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i]!;
}

/** Runs `count` async workers that each call `step` until `total` steps are taken, and awaits them all. */
export async function concurrently(
  count: number,
  total: number,
  step: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < total) {
      const i = next++;
      await step(i);
    }
  };
  await Promise.all(Array.from({ length: count }, worker));
}
