import type { Command } from 'commander';
import { IdemError, InvalidInputError } from '../core/errors.js';
import type { CliContext } from './context.js';

interface BenchOptions {
  quick: boolean;
  only?: string[];
  postgresUrl?: string;
  scale?: number;
  rounds?: number;
  handleSignals?: boolean;
  log?: (message: string) => void;
}

interface BenchModule {
  runBench(options: BenchOptions): Promise<{ failed: unknown[] }>;
  formatTable(report: unknown): string;
}

// Loaded only when `idem bench` runs, so the other verbs neither pay for nor depend on the harness.
// A variable, so the CLI builds and runs in a build without src/bench.
const BENCH_MODULE: string = '../bench/index.js';

interface BenchFlags {
  quick?: boolean;
  json?: boolean;
  only?: string;
  postgres?: string;
  scale?: string;
  rounds?: string;
}

const HELP = `
Scenarios: sqlite-append, postgres-append, postgres-read, http-append, consumer-sqlite,
consumer-postgres, live-latency, catch-up, redelivery, delivery-sqlite, delivery-postgres,
idle-subscriptions, jetstream, testkit, ledger-retention, consumer-group (see docs/benchmarks.md for
what each measures and how to read the figures). \`npm run bench\` builds dist/ first, then runs this
command.

Examples:
  $ idem bench --quick
  $ idem bench --only sqlite-append,catch-up --json
  $ idem bench --only sqlite-append --rounds 5
  $ idem bench --postgres postgres://postgres@127.0.0.1:5432/postgres --only postgres-append`;

/** `idem bench`: the benchmark harness of `npm run bench`, each scenario against a baseline measured in the same run. */
export function registerBench(program: Command, ctx: CliContext): void {
  program
    .command('bench')
    .description('run the benchmark scenarios, each against a baseline measured in the same run')
    .option('--quick', 'small sizes: the whole run takes under a minute')
    .option('--json', 'print the report as JSON')
    .option('--only <names>', 'comma-separated scenario names')
    .option(
      '--postgres <url>',
      'PostgreSQL server for the PostgreSQL scenarios (a random database is created and dropped)',
    )
    .option('--scale <factor>', 'multiply every size (e.g. 0.05 for a smoke run)')
    .option(
      '--rounds <n>',
      "measure each repeated shape n times, interleaved after a warm-up, and report the median (default 3; 1 with --quick; postgres-append's one-event sequential pair 3n)",
    )
    .addHelpText('after', HELP)
    .action(async (flags: BenchFlags) => {
      const options: BenchOptions = {
        quick: flags.quick === true,
        // Ctrl-C or SIGTERM: remove the temporary files and databases, then exit as the signal would.
        handleSignals: true,
        log: (m) => ctx.io.stderr.write(`# ${m}\n`),
      };
      if (flags.only !== undefined) {
        options.only = flags.only
          .split(',')
          .map((s) => s.trim())
          .filter((s) => s !== '');
      }
      if (flags.postgres !== undefined) options.postgresUrl = flags.postgres;
      if (flags.scale !== undefined) {
        const scale = Number(flags.scale);
        if (!Number.isFinite(scale) || scale <= 0)
          throw new InvalidInputError('--scale', 'must be a number > 0');
        options.scale = scale;
      }
      if (flags.rounds !== undefined) {
        const rounds = Number(flags.rounds);
        if (!Number.isInteger(rounds) || rounds < 1 || rounds > 20) {
          throw new InvalidInputError('--rounds', 'must be a whole number from 1 to 20');
        }
        options.rounds = rounds;
      }
      let mod: BenchModule;
      try {
        mod = (await import(BENCH_MODULE)) as BenchModule;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw err;
        throw new IdemError('unavailable', 'the benchmarks are not part of this build', {}, { cause: err });
      }
      const report = await mod.runBench(options);
      ctx.io.stdout.write(
        flags.json === true ? `${JSON.stringify(report, null, 2)}\n` : mod.formatTable(report),
      );
      if (report.failed.length > 0) ctx.exitCode = 1;
    });
}
