import { parseArgs } from 'node:util';
import { IdemError } from '../core/errors.js';
import { formatTable } from './report.js';
import { benchScenarioNames, runBench, type BenchOptions } from './runBench.js';

export interface BenchArgs {
  options: BenchOptions;
  json: boolean;
  help: boolean;
}

export const BENCH_USAGE = `usage: npm run bench -- [--quick] [--json] [--only NAME[,NAME...]] [--postgres URL]

  --quick          small sizes: the whole run takes under a minute (CI runs this)
  --json           print the report as JSON on stdout (progress still goes to stderr)
  --only NAMES     run only these scenarios (repeatable or comma-separated)
  --postgres URL   PostgreSQL server for the PostgreSQL scenarios
                   (default env IDEM_PG_URL, else postgres://postgres@127.0.0.1:5432/postgres);
                   a database with a random name is created and dropped
  --scale F        multiply every size by F (e.g. 0.05 for a smoke test; figures become meaningless)
  --rounds N       measure each append shape N times, interleaved after a warm-up, and report the
                   median (default 3; 1 with --quick)

scenarios: ${benchScenarioNames().join(', ')}
`;

/** Parses the bench command line (without node and the script). Throws on unknown flags. */
export function parseBenchArgs(argv: readonly string[]): BenchArgs {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      quick: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      only: { type: 'string', multiple: true },
      postgres: { type: 'string' },
      scale: { type: 'string' },
      rounds: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  const only = (values.only ?? [])
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v.length > 0);
  const options: BenchOptions = { quick: values.quick };
  if (only.length > 0) options.only = only;
  if (values.postgres !== undefined) options.postgresUrl = values.postgres;
  if (values.scale !== undefined) options.scale = Number(values.scale);
  if (values.rounds !== undefined) options.rounds = Number(values.rounds);
  return { options, json: values.json, help: values.help };
}

export interface BenchIo {
  stdout: { write(s: string): unknown };
  stderr: { write(s: string): unknown };
}

/**
 * Runs the bench as a command: the table (or JSON) on stdout, progress on stderr. Returns the exit
 * code: 0 when every selected scenario ran or was skipped, 1 when one failed, 2 for a usage error.
 * Missed targets do not fail the run: they are figures to read, not a test.
 */
export async function benchMain(argv: readonly string[], io: BenchIo = process): Promise<number> {
  let args: BenchArgs;
  try {
    args = parseBenchArgs(argv);
  } catch (err) {
    io.stderr.write(`idem bench: ${(err as Error).message}\n${BENCH_USAGE}`);
    return 2;
  }
  if (args.help) {
    io.stdout.write(BENCH_USAGE);
    return 0;
  }
  try {
    const report = await runBench({
      ...args.options,
      handleSignals: true,
      log: (m) => io.stderr.write(`# ${m}\n`),
    });
    io.stdout.write(args.json ? `${JSON.stringify(report, null, 2)}\n` : formatTable(report));
    return report.failed.length > 0 ? 1 : 0;
  } catch (err) {
    if (err instanceof IdemError && err.code === 'invalid_input') {
      io.stderr.write(`idem bench: ${err.message}\n${BENCH_USAGE}`);
      return 2;
    }
    throw err;
  }
}
