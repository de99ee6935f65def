import type { Command } from 'commander';
import { IdemError } from '../core/errors.js';
import type { CliContext } from './context.js';
import type { ExitCode } from './exitCodes.js';

interface BenchModule {
  benchMain(argv: readonly string[], io: CliContext['io']): Promise<number>;
}

// A variable, so the CLI builds and runs in a build without src/bench.
const BENCH_MODULE: string = '../bench/index.js';

/** `idem bench ...`: hands its arguments to the benchmark harness (`npm run bench` runs the same). */
export function registerBench(program: Command, ctx: CliContext): void {
  program
    .command('bench')
    .description('run the benchmarks (idem bench --help lists the scenarios)')
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .argument('[args...]', 'bench options: --quick, --json, --only NAMES, --postgres URL, --scale F')
    .action(async (args: string[]) => {
      let mod: BenchModule;
      try {
        mod = (await import(BENCH_MODULE)) as BenchModule;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw err;
        throw new IdemError('unavailable', 'the benchmarks are not part of this build', {}, { cause: err });
      }
      ctx.exitCode = (await mod.benchMain(args, ctx.io)) as ExitCode;
    });
}
