// Runs the real `idem` command as a child process for the CLI tests.
//
// Starting node through the tsx loader costs about a second per process on a busy 2-core machine,
// and these tests start dozens. So each test process first transpiles src/ once with esbuild (the
// same source, type-stripped, as `npm run build` would emit) into a temp dir and runs `src/cli/run.js`
// from there. IDEM_CLI_TEST_TSX=1 runs `node --import tsx src/cli/run.ts` instead.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { until } from '../support/index.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const RUN_TS = join(ROOT, 'src/cli/run.ts');

let prepared: Promise<string[]> | null = null;

/** The node arguments that start the command: `[...loader, script]`. */
function command(): Promise<string[]> {
  prepared ??=
    process.env.IDEM_CLI_TEST_TSX === '1' ? Promise.resolve(['--import', 'tsx', RUN_TS]) : transpile();
  return prepared;
}

async function transpile(): Promise<string[]> {
  const { build } = await import('esbuild');
  const out = mkdtempSync(join(tmpdir(), 'idem-cli-test-'));
  process.once('exit', () => rmSync(out, { recursive: true, force: true }));
  const walk = (d: string): string[] =>
    readdirSync(d).flatMap((n) => {
      const p = join(d, n);
      return statSync(p).isDirectory() ? walk(p) : p.endsWith('.ts') ? [p] : [];
    });
  await build({
    entryPoints: walk(join(ROOT, 'src')),
    outdir: join(out, 'src'),
    outbase: join(ROOT, 'src'),
    format: 'esm',
    platform: 'node',
    target: 'node20',
    logLevel: 'error',
  });
  writeFileSync(join(out, 'package.json'), JSON.stringify({ name: 'idem', type: 'module', version: 'test' }));
  symlinkSync(join(ROOT, 'node_modules'), join(out, 'node_modules'), 'dir');
  // The server reads the dashboard's files from the package root, beside src/.
  symlinkSync(join(ROOT, 'dashboard'), join(out, 'dashboard'), 'dir');
  return [join(out, 'src/cli/run.js')];
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  /** Extra environment; IDEM_POSTGRES_URL, IDEM_TOKEN and IDEM_TOKENS are cleared unless given here. */
  env?: Record<string, string>;
  cwd?: string;
}

function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.IDEM_POSTGRES_URL;
  delete env.IDEM_TOKEN;
  delete env.IDEM_TOKENS;
  delete env.NODE_TEST_CONTEXT;
  return { ...env, ...extra };
}

function spawnCli(cmd: string[], args: readonly string[], options: CliOptions): ChildProcess {
  return spawn(process.execPath, [...cmd, ...args], {
    cwd: options.cwd ?? ROOT,
    env: childEnv(options.env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Runs `idem <args>` to completion. */
export async function idem(args: readonly string[], options: CliOptions = {}): Promise<CliResult> {
  const child = spawnCli(await command(), args, options);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/** Parses a `--json` result, failing with the whole output when it is not JSON. */
export function json<T = unknown>(r: CliResult): T {
  try {
    return JSON.parse(r.stdout) as T;
  } catch {
    throw new Error(`stdout is not JSON (exit ${r.code}):\n${r.stdout}\nstderr:\n${r.stderr}`);
  }
}

/** A long-running `idem` (tail, serve) whose output can be awaited. */
export interface LiveCli {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves once stdout (or stderr) matches. */
  waitFor(pattern: RegExp, stream?: 'stdout' | 'stderr', timeoutMs?: number): Promise<RegExpMatchArray>;
  /** Sends `signal` and resolves with the exit; kills it outright if it does not exit in time. */
  stop(signal?: NodeJS.Signals): Promise<CliResult>;
}

export async function startIdem(args: readonly string[], options: CliOptions = {}): Promise<LiveCli> {
  const child = spawnCli(await command(), args, options);
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (err += s));
  const exited = new Promise<CliResult>((resolve) => {
    child.once('close', (code, signal) => resolve({ code, signal, stdout: out, stderr: err }));
  });
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    waitFor: (pattern, stream = 'stdout', timeoutMs = 20_000) =>
      until(
        () => {
          if (child.exitCode !== null)
            throw new Error(`idem exited (${child.exitCode}) before ${pattern}:\n${out}\n${err}`);
          return (stream === 'stdout' ? out : err).match(pattern);
        },
        { timeoutMs, message: `${pattern} on ${stream}; got stdout:\n${out}\nstderr:\n${err}` },
      ),
    stop: async (signal = 'SIGINT') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
