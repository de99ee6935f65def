/** The fault table: one row per scenario, the seed first. */
import { passed, type ScenarioResult } from './types.js';

const COLUMNS = [
  'scenario',
  'faults injected',
  'events',
  'delivered',
  'dup skipped',
  'lost',
  'doubled',
  'out-of-order',
  'result',
] as const;

function row(r: ScenarioResult): string[] {
  const result = r.skipped !== undefined ? 'skip' : passed(r) ? 'PASS' : 'FAIL';
  return [
    r.name,
    r.faults || '-',
    String(r.events),
    String(r.delivered),
    String(r.duplicates),
    String(r.lost),
    String(r.doubled),
    String(r.outOfOrder),
    result,
  ];
}

/** A Markdown table (readable in a terminal and pasteable into docs/reliability.md). */
export function formatTable(results: readonly ScenarioResult[]): string {
  const rows = [COLUMNS.slice(), ...results.map(row)];
  const widths = COLUMNS.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]): string =>
    `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [
    line(rows[0]!),
    `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`,
    ...rows.slice(1).map(line),
  ].join('\n');
}

/** Notes, errors and skip reasons under the table. */
export function formatNotes(results: readonly ScenarioResult[]): string {
  const out: string[] = [];
  for (const r of results) {
    const parts = [...r.notes, `${(r.durationMs / 1000).toFixed(1)} s`];
    if (r.skipped !== undefined) parts.push(`skipped: ${r.skipped}`);
    if (r.error !== undefined) parts.push(`ERROR: ${r.error}`);
    out.push(`- ${r.name}: ${parts.join('; ')}`);
  }
  return out.join('\n');
}
