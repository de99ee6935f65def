import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import type { CliContext } from './context.js';
import { EXIT, type ExitCode } from './exitCodes.js';
import { Output, type Io } from './output.js';
import { UsageError } from './usageError.js';
import { registerAppend } from './append.js';
import { registerRead } from './read.js';
import { registerEvents } from './events.js';
import { registerTail } from './tail.js';
import { registerConsumers } from './consumers.js';
import { registerDlq } from './dlq.js';
import { registerServe } from './serve.js';
import { registerVerify } from './verify.js';
import { registerBench } from './bench.js';
import { registerDemo } from './demo.js';
import { registerEffects } from './effects.js';
import { registerRebuild } from './rebuild.js';
import { registerRelay } from './relay.js';
import { registerBackup } from './backup.js';
import { registerShred } from './shred.js';

export interface MainOptions {
  io?: Io;
  env?: NodeJS.ProcessEnv;
  /** Aborting it stops `tail` and `serve`. @default SIGINT/SIGTERM of this process */
  signal?: AbortSignal;
}

const DESCRIPTION = `idem: an event store with durable subscriptions and idempotent consumers.

Every store verb takes --db PATH (embedded SQLite, default ./data/idem.db),
--postgres URL (or env IDEM_POSTGRES_URL) or --url URL (a server; token from env
IDEM_TOKEN), and --json for machine-readable output.
Only append and serve create a missing store (and say so on stderr); every other
verb fails with "no store at PATH" (or "no idem store in schema X of DATABASE")
and creates nothing.
Exit codes: 0 ok, 1 failure, 2 usage error or invalid input, 3 conflict.`;

const EXAMPLES = `
Examples:
  $ idem append invoice-42 --type invoice.issued --data '{"amount":100}'
  $ idem read invoice-42
  $ idem events --after 10 --type invoice.paid --json
  $ idem tail --consumer billing_v1
  $ idem consumers
  $ idem serve --port 4680`;

/** Builds the command tree. Exposed for tests that inspect the verbs. */
export function buildProgram(ctx: CliContext): Command {
  const program = new Command('idem');
  program
    .description(DESCRIPTION)
    .version(packageVersion(), '-V, --version')
    .exitOverride()
    .configureOutput({
      writeOut: (s) => ctx.io.stdout.write(s),
      writeErr: (s) => ctx.io.stderr.write(s),
      // Commander's own parse errors are re-printed by `main` in idem's format.
      outputError: () => undefined,
    })
    .showSuggestionAfterError(true)
    .addHelpText('after', EXAMPLES);
  // Subcommands created with `.command()` inherit the settings above.
  registerAppend(program, ctx);
  registerRead(program, ctx);
  registerEvents(program, ctx);
  registerTail(program, ctx);
  registerConsumers(program, ctx);
  registerRebuild(program, ctx);
  registerEffects(program, ctx);
  registerDlq(program, ctx);
  registerServe(program, ctx);
  registerRelay(program, ctx);
  registerBackup(program, ctx);
  registerShred(program, ctx);
  registerVerify(program, ctx);
  registerBench(program, ctx);
  registerDemo(program, ctx);
  return program;
}

/**
 * Runs the `idem` command with `argv` as in `process.argv` (node, script, args...) and returns the exit
 * code. Never throws: failures are printed as `idem: <code>: <message>`.
 */
export async function main(argv: readonly string[], options: MainOptions = {}): Promise<number> {
  const io = options.io ?? { stdout: process.stdout, stderr: process.stderr };
  const json = argv.slice(2).includes('--json');
  if (!options.io) ignoreEpipe();
  const out = new Output(io, json);
  let stop: { signal: AbortSignal; dispose(): void } | null = null;
  const ctx: CliContext = {
    io,
    exitCode: EXIT.ok,
    stopSignal: () => {
      if (options.signal) return options.signal;
      stop ??= onStopSignals();
      return stop.signal;
    },
    env: options.env ?? process.env,
  };
  try {
    const program = buildProgram(ctx);
    if (argv.length <= 2) {
      program.outputHelp();
      return EXIT.ok;
    }
    await program.parseAsync([...argv]);
    return ctx.exitCode;
  } catch (err) {
    if (err instanceof CommanderError) return commanderExit(err, out);
    return out.failure(err);
  } finally {
    (stop as { dispose(): void } | null)?.dispose();
  }
}

function commanderExit(err: CommanderError, out: Output): ExitCode {
  if (
    err.code === 'commander.helpDisplayed' ||
    err.code === 'commander.version' ||
    err.code === 'commander.help'
  ) {
    return EXIT.ok;
  }
  if (err.code === 'commander.executeSubCommandAsync') return EXIT.failure;
  return out.failure(new UsageError(err.message.replace(/^error: /, '')));
}

/** Turns the first SIGINT/SIGTERM into an abort; a second one exits at once. */
function onStopSignals(): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const onSignal = (sig: NodeJS.Signals): void => {
    if (controller.signal.aborted) process.exit(sig === 'SIGINT' ? 130 : 143);
    controller.abort(new Error(sig));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    signal: controller.signal,
    dispose() {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

let epipeIgnored = false;

/**
 * A reader that closes the pipe early (`idem events | head`) is not an error. The listener stays for
 * the life of the process: the failed write can surface after `main` has returned.
 */
function ignoreEpipe(): void {
  if (epipeIgnored) return;
  epipeIgnored = true;
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(typeof process.exitCode === 'number' ? process.exitCode : 0);
    throw err;
  });
}

function packageVersion(): string {
  // package.json is two levels up from both src/cli/ (tsx) and dist/cli/ (built).
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    return pkg.version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}
