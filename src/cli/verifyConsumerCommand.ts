import type { ConsumerTarget } from '../core/consumerTarget.js';
import { MAX_SEED } from '../testkit/derive.js';
import { verifyConsumer, type VerifyReport } from '../testkit/index.js';
import type { CliContext } from './context.js';
import { loadConsumerModule } from './consumerModule.js';
import { EXIT } from './exitCodes.js';
import { Output, plural, table } from './output.js';
import { UsageError } from './usageError.js';

export interface VerifyConsumerFlags {
  consumer: string;
  events?: string;
  seed?: string;
  postgres?: string;
  db?: string;
  url?: string;
  json?: boolean;
}

const MAX_INPUT_LINES = 10;

/** `idem verify --consumer FILE`: the testkit's checklist for a user's consumer module. */
export async function verifyConsumerCommand(flags: VerifyConsumerFlags, ctx: CliContext): Promise<void> {
  if (flags.db !== undefined || flags.url !== undefined)
    throw new UsageError(
      '--consumer runs on temporary stores: give no --db or --url (--postgres URL is allowed)',
    );
  const out = new Output(ctx.io, flags.json === true);
  const mod = await loadConsumerModule(flags.consumer, flags.events);
  const seed = flags.seed === undefined ? undefined : parseSeed(flags.seed);
  if (seed !== undefined && !mod.samples)
    throw new UsageError('--seed applies only to a module that exports samples (and no events, no --events)');
  const pg = flags.postgres
    ? (await import('./postgresVerifyBackend.js')).postgresVerifyBackend(flags.postgres)
    : null;
  let report: VerifyReport;
  try {
    report = await verifyConsumer<ConsumerTarget<unknown>>({
      consumer: mod.consumer,
      read: mod.read,
      ...(mod.samples ? { samples: mod.samples, ...(seed !== undefined ? { seed } : {}) } : {}),
      ...(mod.events ? { events: mod.events } : {}),
      ...(mod.effects ? { effects: mod.effects } : {}),
      ...(pg ? { backend: pg } : {}),
    });
  } finally {
    await pg?.end();
  }
  out.data(report);
  for (const line of formatReport(report)) out.line(line);
  ctx.exitCode = report.ok ? EXIT.ok : EXIT.failure;
}

function parseSeed(text: string): number {
  const n = /^\d{1,10}$/.test(text) ? Number(text) : NaN;
  if (!(n <= MAX_SEED)) throw new UsageError(`--seed must be an integer from 0 to ${MAX_SEED}`);
  return n;
}

/** The checklist as a table, then each failure with its smallest input and state difference. */
export function formatReport(r: VerifyReport): string[] {
  const d = r.derived;
  const from = d
    ? ` derived from ${d.used < d.samples ? `${d.used} of ` : ''}${plural(d.samples, 'sample')} with seed ${d.seed} (replay: --seed ${d.seed})`
    : '';
  const lines = [
    `${r.consumer}: ${r.events} events${from} on ${r.backend}, ${(r.elapsedMs / 1000).toFixed(1)} s`,
    '',
    table(
      ['statement', 'verdict', 'scenario', 'smallest input'],
      r.statements.map((s) => [
        s.statement,
        s.verdict === 'holds' ? 'holds' : 'FAILS',
        s.failure?.scenario ?? '',
        s.failure ? `${s.failure.events.length} of ${s.failure.shrink.from} events` : '',
      ]),
    ),
  ];
  for (const s of r.statements) {
    const f = s.failure;
    if (!f) continue;
    lines.push('', `${s.statement} fails (${f.scenario}): ${f.message}`);
    lines.push(
      `  smallest input (${plural(f.events.length, 'event')}${f.shrink.minimal ? '' : ', shrinking stopped at its budget'}):`,
    );
    for (const e of f.events.slice(0, MAX_INPUT_LINES)) lines.push(`    ${JSON.stringify(e)}`);
    if (f.events.length > MAX_INPUT_LINES) lines.push(`    (${f.events.length - MAX_INPUT_LINES} more)`);
    if (f.difference.length > 0) lines.push('  state difference (expected is the clean run):');
    for (const d of f.difference)
      lines.push(
        `    ${d.path}: expected ${JSON.stringify(d.expected) ?? 'nothing'}, got ${JSON.stringify(d.actual) ?? 'nothing'}`,
      );
  }
  lines.push('', 'scenarios:');
  for (const sc of r.scenarios) {
    const notes = sc.notes.length > 0 ? `: ${sc.notes.join('; ')}` : '';
    lines.push(`  ${sc.outcome.padEnd(7)} ${sc.id} (${(sc.ms / 1000).toFixed(1)} s)${notes}`);
  }
  lines.push(
    '',
    r.ok
      ? 'ok: every statement holds'
      : `FAILED: ${r.statements.filter((s) => s.verdict === 'fails').length} of ${r.statements.length} statements fail`,
  );
  return lines;
}
