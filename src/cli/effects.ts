import type { Command } from 'commander';
import { effectCounts, listEffects, retryEffects } from '../effects/admin.js';
import { EFFECT_STATUSES, type EffectStatus } from '../core/effectTypes.js';
import { InvalidInputError, NotFoundError } from '../core/errors.js';
import type { CliContext } from './context.js';
import { Output, table } from './output.js';
import { parseInteger } from './parse.js';
import { withTarget, withTargetOptions, type TargetFlags } from './targetFlags.js';
import { UsageError } from './usageError.js';

const HELP = `
Effects are external side effects (emails, payments, webhooks) that handlers record with
ctx.effect(kind, payload) in the target's outbox; a dispatcher calls them with the effect id
(<scope>/<key>) as idempotency key. Statuses: pending, done, failed, suppressed (history replayed
by a new consumer version: recorded, never sent).

Examples:
  $ idem effects list --target-db ./data/target.db
  $ idem effects list --status failed --target-postgres postgres://localhost/app --json
  $ idem effects retry billing/3f1c...:send-receipt --target-db ./data/target.db
  $ idem effects retry --all-failed --target-db ./data/target.db`;

type ListFlags = TargetFlags & { status?: string; scope?: string; limit?: string; json?: boolean };

export function registerEffects(program: Command, ctx: CliContext): void {
  const effects = program
    .command('effects')
    .description("list and retry consumers' external effects (the outbox)")
    .addHelpText('after', HELP);

  withTargetOptions(
    effects.command('list').description('outbox rows, oldest first, with status, attempts and last error'),
  )
    .option('--status <status>', `only rows in this status (${EFFECT_STATUSES.join(', ')})`)
    .option('--scope <scope>', "only this scope (a consumer's base name, e.g. billing)")
    .option('--limit <n>', 'most rows to print (default 100)')
    .option('--json', 'machine-readable output on stdout')
    .action(async (flags: ListFlags) => {
      const out = new Output(ctx.io, flags.json === true);
      if (flags.status !== undefined && !EFFECT_STATUSES.includes(flags.status as EffectStatus)) {
        throw new InvalidInputError('--status', `must be one of ${EFFECT_STATUSES.join(', ')}`);
      }
      const limit = parseInteger(flags.limit, '--limit', 1) ?? 100;
      const { rows, counts } = await withTarget(flags, ctx.env, async (target) => ({
        rows: await listEffects(target, {
          limit,
          ...(flags.status ? { status: flags.status as EffectStatus } : {}),
          ...(flags.scope ? { scope: flags.scope } : {}),
        }),
        counts: await effectCounts(target),
      }));
      out.data(rows);
      out.note(
        `pending ${counts.pending}, done ${counts.done}, failed ${counts.failed}, suppressed ${counts.suppressed}`,
      );
      if (rows.length === 0) {
        out.note('no effects');
        return;
      }
      out.line(
        table(
          ['ID', 'KIND', 'STATUS', 'ATTEMPTS', 'POSITION', 'CONSUMER', 'LAST_ERROR'],
          rows.map((r) => [
            r.idempotencyKey,
            r.kind,
            r.status,
            String(r.attempts),
            String(r.position),
            r.consumer,
            r.lastError ?? '-',
          ]),
        ),
      );
    });

  withTargetOptions(
    effects
      .command('retry')
      .description('make a failed (or suppressed) effect pending again, with a fresh attempt count'),
  )
    .argument('[id]', 'the effect id as listed: <scope>/<key>')
    .option('--all-failed', 'every failed effect')
    .option('--json', 'machine-readable output on stdout')
    .action(async (id: string | undefined, flags: TargetFlags & { allFailed?: boolean; json?: boolean }) => {
      const out = new Output(ctx.io, flags.json === true);
      if ((id === undefined) === (flags.allFailed !== true))
        throw new UsageError('give an effect id or --all-failed (one of them)');
      const n = await withTarget(flags, ctx.env, (target) => retryEffects(target, id ?? { allFailed: true }));
      if (n === 0 && id !== undefined) throw new NotFoundError('failed or suppressed effect', id);
      out.data({ retried: n });
      out.line(`${n} effect${n === 1 ? '' : 's'} pending again`);
    });
}
