import type { Command } from 'commander';
import { InvalidInputError } from '../core/errors.js';
import type { CliContext } from './context.js';

interface DemoFlags {
  events?: string;
  keep?: boolean;
  json?: boolean;
}

const HELP = `
On a temporary embedded store (removed at the end unless --keep), served by an in-process server,
the billing_v2 consumer runs in a child process while invoices are appended. The demo SIGKILLs it
between a commit and its acknowledgement, cuts its connection once, appends duplicates, moves its
cursor past two events of an invoice (a version gap) and rewinds it to 0; then it compares the
consumer's SQLite target with an exactly-once fold of the store's events.
Exit code 0 only when lost=0, doubled=0 and every invoice total is right.

Examples:
  $ idem demo
  $ idem demo --events 500 --json
  $ idem demo --keep`;

/** `idem demo`: the consumer runtime through crashes, duplicates, a reconnect and a version gap, checked. */
export function registerDemo(program: Command, ctx: CliContext): void {
  program
    .command('demo')
    .description(
      'run the billing consumer through a crash, a reconnect, duplicates and a version gap, and check its totals',
    )
    .option('--events <n>', 'invoice events to append (about 10 per invoice)', '2000')
    .option('--keep', 'keep the temporary store and target, and print where they are')
    .option('--json', 'print the report as JSON (progress goes to stderr)')
    .addHelpText('after', HELP)
    .action(async (flags: DemoFlags) => {
      const events = Number(flags.events);
      if (!Number.isSafeInteger(events) || events < 20 || events > 1_000_000) {
        throw new InvalidInputError('--events', 'must be an integer from 20 to 1000000');
      }
      const json = flags.json === true;
      const progress = json ? ctx.io.stderr : ctx.io.stdout;
      // Loaded here: the demo brings in the server and client, which the other verbs do not need.
      const { runDemo, formatReport } = await import('../demo/index.js');
      const report = await runDemo({
        events,
        keep: flags.keep === true,
        log: (line) => progress.write(`${line}\n`),
      });
      ctx.io.stdout.write(json ? `${JSON.stringify(report, null, 2)}\n` : formatReport(report));
      if (!report.ok) ctx.exitCode = 1;
    });
}
