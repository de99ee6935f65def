import type { BenchReport, BenchRow } from './types.js';

const HEADERS = [
  'scenario',
  'shape',
  'events',
  'seconds',
  'events/s',
  'baseline events/s',
  'ratio',
  'target',
  'met?',
] as const;

function fmtInt(n: number | null): string {
  return n === null ? '' : Math.round(n).toLocaleString('en-US');
}

function cells(r: BenchRow): string[] {
  const extra = Object.entries(r.extra)
    .map(([k, v]) => `${k}=${Number.isInteger(v) ? v : v.toFixed(2)}`)
    .join(' ');
  return [
    r.scenario,
    extra ? `${r.shape} (${extra})` : r.shape,
    fmtInt(r.events),
    r.seconds.toFixed(2),
    fmtInt(r.eventsPerSec),
    fmtInt(r.baselineEventsPerSec),
    r.ratio === null ? '' : `${r.ratio.toFixed(2)}x`,
    r.target ?? '',
    r.met === null ? '' : r.met ? 'yes' : 'NO',
  ];
}

/** The results as a plain-text table, with skipped and failed scenarios listed below it. */
export function formatTable(report: BenchReport): string {
  const body = report.rows.map(cells);
  const widths = HEADERS.map((h, i) => Math.max(h.length, ...body.map((c) => c[i]!.length)));
  const line = (c: readonly string[]): string =>
    c
      .map((v, i) => (i >= 2 && i <= 6 ? v.padStart(widths[i]!) : v.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  const out = [
    `idem bench (${report.mode}) ${report.startedAt} on ${report.machine.cpus} x ${report.machine.cpuModel}, ` +
      `${report.machine.memoryGb} GB, node ${report.machine.node}` +
      (report.machine.cpuIdle === undefined ? '' : `, ${report.machine.cpuIdle}`),
    '',
    line(HEADERS),
    line(widths.map((w) => '-'.repeat(w))),
    ...body.map(line),
  ];
  for (const s of report.skipped) out.push(`skipped ${s.scenario}: ${s.reason}`);
  for (const f of report.failed) out.push(`FAILED ${f.scenario}: ${f.reason}`);
  out.push('', `total ${report.totalSeconds.toFixed(1)} s`);
  return out.join('\n') + '\n';
}
