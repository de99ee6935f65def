// Runs `main` in this process with captured output: for tables of cases where starting a process per
// case would only repeat what the child-process tests already prove about the `idem` binary.
import { main } from '../../src/cli/main.js';
import type { CliResult } from './cli.js';

export async function idemInProcess(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const io = {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
  };
  const code = await main(['node', 'idem', ...args], { io, env, signal: new AbortController().signal });
  return { code, signal: null, stdout, stderr };
}
