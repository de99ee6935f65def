import type { BenchRow } from './types.js';

export interface Timed {
  events: number;
  seconds: number;
  eventsPerSec: number;
}

/** Runs `fn` and returns how long it took, with the rate for `events`. */
export async function timed(events: number, fn: () => Promise<void> | void): Promise<Timed> {
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
    extra: spec.extra ?? {},
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
    extra,
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
