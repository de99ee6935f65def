import type { Command } from 'commander';
import type { CliContext } from './context.js';
import { EXIT } from './exitCodes.js';
import { describeTarget, withStore, withStoreOptions, type StoreFlags } from './openStore.js';
import { Output, plural } from './output.js';
import { UsageError } from './usageError.js';
import { verifyLog } from './verifyLog.js';
import { verifyConsumerCommand, type VerifyConsumerFlags } from './verifyConsumerCommand.js';

const HELP = `
Reads the whole log and checks the store's invariants: global positions are exactly 1..head with no
gap, each stream's versions are contiguous (1, 2, 3, ...), and every event id is unique.
Prints a summary; exits 1 when a violation is found.

With --consumer FILE it checks your consumer instead of a store: FILE (JS, or TypeScript when tsx
is installed) exports consumer = (source, target, { version }) => createConsumer(...), read =
(target, { version }) => JSON state, and either events (or give --events FILE.jsonl, one
{"stream","type","data"} per line) or samples: example events from which it derives a history
(several entities per sample stream, only the types the consumer's filter takes) from a seed it
prints; --seed N derives the same history again. It runs the production checklist of the
idempotent-consumer pattern (every event twice, a lost ack, a crash inside a batch, a rewind to 0,
restarts, a late version, a poison event, a rebuild) on temporary SQLite files (or temporary
schemas with --postgres URL) and prints each statement: holds, or fails with the smallest failing
input.
Exit 0 when every statement holds, 1 when one fails, 2 when FILE lacks an export.

Examples:
  $ idem verify
  $ idem verify --postgres postgres://postgres@127.0.0.1/idem --json
  $ idem verify --consumer ./balances.js
  $ idem verify --consumer ./balances.ts --events ./history.jsonl --json
  $ idem verify --consumer ./balances.ts --seed 1234`;

export function registerVerify(program: Command, ctx: CliContext): void {
  withStoreOptions(
    program
      .command('verify')
      .description('check a store (gap-free positions, contiguous versions, unique ids) or a consumer'),
  )
    .option('--consumer <file>', 'check a consumer module against the checklist instead of a store')
    .option('--events <file.jsonl>', 'with --consumer: the history to feed, one event per line')
    .option('--seed <n>', "with --consumer and a module's samples: the seed of the derived history")
    .addHelpText('after', HELP)
    .action(async (flags: StoreFlags & Partial<VerifyConsumerFlags>) => {
      if (flags.consumer !== undefined)
        return verifyConsumerCommand({ ...flags, consumer: flags.consumer }, ctx);
      if (flags.events !== undefined) throw new UsageError('--events needs --consumer');
      if (flags.seed !== undefined) throw new UsageError('--seed needs --consumer');
      const out = new Output(ctx.io, flags.json === true);
      const { report, where } = await withStore(flags, ctx.env, async (store, target) => {
        const head = await store.headPosition();
        return { report: await verifyLog(store.readAll(), head), where: describeTarget(target) };
      });
      out.data(report);
      const facts = `${plural(report.events, 'event')} in ${plural(report.streams, 'stream')}, head ${report.head}`;
      if (report.ok) {
        out.line(`ok: ${where}: ${facts}; positions gap-free, versions contiguous, ids unique`);
        return;
      }
      const total = Object.values(report.counts).reduce((a, b) => a + b, 0);
      out.line(`FAILED: ${where}: ${facts}; ${plural(total, 'violation')}`);
      for (const [kind, n] of Object.entries(report.counts)) if (n > 0) out.line(`  ${kind}: ${n}`);
      for (const v of report.violations) out.line(`  - ${v.kind}: ${v.message}`);
      if (report.violations.length < total)
        out.line(`  (${total - report.violations.length} more not shown)`);
      ctx.exitCode = EXIT.failure;
    });
}
