import { resolve } from 'node:path';
import type { Command } from 'commander';
import type { ConsumerOptions } from '../consumer/options.js';
import { InvalidInputError } from '../core/errors.js';
import { validateConsumerName } from '../core/validation.js';
import { rebuildConsumer, type RebuildProgress } from '../consumer/rebuild.js';
import { pruneConsumerLedger } from '../consumer/ledgerPruner.js';
import { listConsumerVersions, promoteConsumer, resetLedger } from '../effects/versions.js';
import type { CliContext } from './context.js';
import { importUserModule } from './consumerModule.js';
import { withStore, withStoreOptions, type StoreFlags } from './openStore.js';
import { Output, table } from './output.js';
import { requireInteger } from './parse.js';
import { withNewOrExistingTarget, withTarget, withTargetOptions, type TargetFlags } from './targetFlags.js';
import { UsageError } from './usageError.js';

const REBUILD_HELP = `
Starts <name_vN> (given with --as) from the beginning of the store into fresh tables, while <name>
keeps serving. The projection comes from --module: a JS/TS module whose default export (or export
"consumer") holds the consumer options: handle, and optionally filter, guard, effects, onError, batch.
The handler picks its tables with ctx.tableSuffix (e.g. invoices_v3). Effects of history are
recorded as suppressed, and effects the old version already recorded are not recorded again.
Progress (position, events/s, ETA) is printed every second; the command ends once the new version
has caught up (keep it running with --follow), then promote it with \`idem consumer promote\`.

Example:
  $ idem consumer rebuild billing_v2 --as billing_v3 --module ./billing.js --db ./data/idem.db --target-db ./data/target.db`;

const RESET_LEDGER_HELP = `
Deletes the consumer's dedup ledger, checkpoint and entity versions in the target (never the effect
outbox). The next delivery re-applies everything: only safe when the output tables are also rebuilt.
Combine with \`idem consumer reset <name> --to 0\` to redeliver history. Stop the consumer first.
Refused without --yes.

Example:
  $ idem consumer reset-ledger billing_v3 --yes --target-db ./data/target.db`;

const PRUNE_LEDGER_HELP = `
Deletes the consumer's dedup ledger rows in the target that its checkpoint covers, keeping the rows
of the newest --keep events, and records the pruned horizon in the target and in the store: a
\`consumer reset\` below it is then refused. Rows at and after the consumer's first parked dead
letter stay. With a command-id or key guard, retry or skip the dead letters first (--key-guards
prunes nothing while any is parked). After \`reset-ledger\`, run it once to clear the store's horizon.
See docs/data-lifecycle.md.

Examples:
  $ idem consumer prune-ledger billing_v2 --db ./data/idem.db --target-db ./data/target.db
  $ idem consumer prune-ledger billing_v2 --keep 100000 --postgres $PG --target-postgres $PG`;

type Flags = StoreFlags & TargetFlags;

function formatProgress(p: RebuildProgress): string {
  const eta = p.caughtUp ? 'caught up' : p.etaSeconds === null ? 'ETA unknown' : `ETA ${p.etaSeconds} s`;
  return `${p.name}: position ${p.position}/${p.head}, ${p.eventsPerSecond} events/s, ${p.events} events, ${eta} (${p.elapsedSeconds} s)`;
}

async function loadProjection(path: string): Promise<Partial<ConsumerOptions<unknown>>> {
  const mod = await importUserModule(resolve(path), '--module');
  const options = (mod.consumer ?? mod.default) as Partial<ConsumerOptions<unknown>> | undefined;
  if (
    !options ||
    typeof options !== 'object' ||
    (typeof options.handle !== 'function' && typeof options.handleBatch !== 'function')
  ) {
    throw new InvalidInputError(
      '--module',
      'must export (default or "consumer") an object with a handle or handleBatch function',
    );
  }
  return options;
}

/** Adds `rebuild`, `promote`, `versions`, `prune-ledger` and `reset-ledger` to the `consumer` verb. */
export function registerRebuild(program: Command, ctx: CliContext): void {
  const consumer = program.commands.find((c) => c.name() === 'consumer') ?? program.command('consumer');

  withTargetOptions(
    withStoreOptions(
      consumer
        .command('rebuild')
        .description('start a new consumer version from the beginning into fresh tables'),
    ),
  )
    .argument('<name>', 'the version in service, e.g. billing_v2')
    .requiredOption('--as <name_vN>', 'the new version, e.g. billing_v3')
    .requiredOption(
      '--module <path>',
      'module exporting the consumer options (handle, filter, guard, effects...)',
    )
    .option('--follow', 'keep running (live) after catching up, until Ctrl-C')
    .addHelpText('after', REBUILD_HELP)
    .action(async (name: string, flags: Flags & { as: string; module: string; follow?: boolean }) => {
      const out = new Output(ctx.io, flags.json === true);
      const projection = await loadProjection(flags.module);
      await withStore(flags, ctx.env, (store) =>
        // A rebuild may write into a new target (fresh tables for the new version).
        withNewOrExistingTarget(flags, ctx.env, async (target) => {
          const rebuild = rebuildConsumer({
            ...projection,
            source: store,
            target,
            from: validateConsumerName(name, '<name>'),
            as: validateConsumerName(flags.as, '--as'),
            onProgress: (p) => out.note(formatProgress(p)),
          });
          const signal = ctx.stopSignal();
          await rebuild.start();
          try {
            const stopped = new Promise<void>((res) =>
              signal.addEventListener('abort', () => res(), { once: true }),
            );
            await Promise.race([rebuild.whenCaughtUp(), stopped]);
            if (flags.follow && !signal.aborted) await stopped;
          } finally {
            await rebuild.stop();
          }
          const p = await rebuild.progress();
          out.data(p);
          out.line(formatProgress(p));
          if (p.caughtUp || !signal.aborted) out.note(`promote it with: idem consumer promote ${p.name}`);
        }),
      );
    });

  withTargetOptions(
    withStoreOptions(
      consumer.command('promote').description('switch readers to a consumer version once it has caught up'),
    ),
  )
    .argument('<name>', 'the version to promote, e.g. billing_v3')
    .addHelpText(
      'after',
      '\nRecords the version as active for its base name in the target (readers use activeVersion()).\nRefused (exit 1, code unavailable) while the version is behind the store.\n\nExample:\n  $ idem consumer promote billing_v3 --db ./data/idem.db --target-db ./data/target.db',
    )
    .action(async (name: string, flags: Flags) => {
      const out = new Output(ctx.io, flags.json === true);
      const active = await withStore(flags, ctx.env, (store) =>
        withTarget(flags, ctx.env, (target) =>
          promoteConsumer({ source: store, target, name: validateConsumerName(name, '<name>') }),
        ),
      );
      out.data(active);
      out.line(
        `${active.consumer} is now the active version of ${active.base}${active.previous ? ` (was ${active.previous})` : ''}`,
      );
    });

  withTargetOptions(
    consumer
      .command('versions')
      .description('consumer versions known to a target, their live points and the active ones'),
  )
    .option('--json', 'machine-readable output on stdout')
    .action(async (flags: TargetFlags & { json?: boolean }) => {
      const out = new Output(ctx.io, flags.json === true);
      const v = await withTarget(flags, ctx.env, (target) => listConsumerVersions(target));
      out.data(v);
      const active = new Set(v.active.map((a) => a.consumer));
      out.line(
        table(
          ['CONSUMER', 'BASE', 'ACTIVE', 'LIVE_FROM', 'REBUILD_OF', 'CREATED'],
          v.versions.map((r) => [
            r.consumer,
            r.base,
            active.has(r.consumer) ? 'yes' : '-',
            String(r.liveFrom),
            r.rebuildOf ?? '-',
            r.createdAt,
          ]),
        ),
      );
    });

  withTargetOptions(
    withStoreOptions(
      consumer
        .command('prune-ledger')
        .description("delete the dedup ledger rows a consumer's checkpoint covers"),
    ),
  )
    .argument('<name>', 'consumer name')
    .option('--keep <events>', 'keep the rows of the newest N events', '0')
    .option('--key-guards', 'the consumer uses a command-id or key guard')
    .option('--entity-version', 'the consumer uses the entity-version guard: no horizon for the store')
    .addHelpText('after', PRUNE_LEDGER_HELP)
    .action(
      async (name: string, flags: Flags & { keep: string; keyGuards?: boolean; entityVersion?: boolean }) => {
        const out = new Output(ctx.io, flags.json === true);
        const n = validateConsumerName(name, '<name>');
        const keep = requireInteger(flags.keep, '--keep', 0);
        const r = await withStore(flags, ctx.env, (store) =>
          withTarget(flags, ctx.env, (target) =>
            pruneConsumerLedger(store, target, n, {
              keep,
              keysBeyondIds: flags.keyGuards === true,
              reportHorizon: flags.entityVersion !== true,
            }),
          ),
        );
        if (!r) {
          out.data({ consumer: n, deleted: 0, horizon: null, reason: 'parked' });
          out.line(`${n} has parked dead letters and a key guard: nothing pruned (retry or skip them first)`);
          return;
        }
        out.data({ consumer: n, ...r });
        out.line(`ledger of ${n} pruned: ${r.deleted} rows deleted, horizon ${r.horizon}`);
      },
    );

  withTargetOptions(
    consumer
      .command('reset-ledger')
      .description("clear a consumer's ledger, checkpoint and entity versions in the target"),
  )
    .argument('<name>', 'consumer name')
    .option('--yes', 'confirm: the next delivery re-applies everything')
    .option('--json', 'machine-readable output on stdout')
    .addHelpText('after', RESET_LEDGER_HELP)
    .action(async (name: string, flags: TargetFlags & { yes?: boolean; json?: boolean }) => {
      const out = new Output(ctx.io, flags.json === true);
      const n = validateConsumerName(name, '<name>');
      if (flags.yes !== true) {
        throw new UsageError(
          `reset-ledger deletes the dedup ledger, checkpoint and entity versions of ${n} in the target (not the effect outbox); ` +
            'the next delivery re-applies everything, which is only safe when the output tables are also rebuilt. Add --yes to confirm',
        );
      }
      const r = await withTarget(flags, ctx.env, (target) => resetLedger(target, n));
      out.data({ consumer: n, ...r });
      out.line(
        `ledger of ${n} cleared: ${r.ledgerRows} ledger rows, ${r.checkpoints} checkpoint, ${r.entityVersions} entity versions`,
      );
    });
}
