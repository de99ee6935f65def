/**
 * Real child processes for the fault scenarios: `node --import tsx <script>` (or the script bundled once
 * with esbuild, which tsx brings, because a loaded 2-core machine takes seconds to start tsx), a line
 * protocol on stdout, and SIGKILL / SIGSTOP / SIGCONT.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, symlinkSync } from 'node:fs';
import { basename, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));

/** The child scripts, by name. */
export const SCRIPTS = {
  consumer: fileURLToPath(new URL('./children/consumerChild.ts', import.meta.url)),
  server: fileURLToPath(new URL('./children/serverChild.ts', import.meta.url)),
  relay: fileURLToPath(new URL('./children/relayChild.ts', import.meta.url)),
  /** The `idem` command itself. */
  cli: fileURLToPath(new URL('../src/cli/run.ts', import.meta.url)),
} as const;
export type ScriptName = keyof typeof SCRIPTS;

/** Resolves child scripts to node arguments; bundles each one once into `dir`. */
export class ScriptRunner {
  private readonly cache = new Map<ScriptName, string[]>();
  private linked = false;
  constructor(private readonly dir: string) {}

  command(name: ScriptName): string[] {
    const cached = this.cache.get(name);
    if (cached) return cached;
    const script = SCRIPTS[name];
    let args = ['--import', 'tsx', script];
    const esbuild = resolve(ROOT, 'node_modules/.bin/esbuild');
    // The CLI loads its store and server modules by relative path at run time, so it runs unbundled.
    if (name !== 'cli' && process.env.IDEM_FAULTS_NO_BUNDLE !== '1' && existsSync(esbuild)) {
      const out = resolve(this.dir, `${basename(script, '.ts')}.mjs`);
      const r = spawnSync(esbuild, [
        script,
        '--bundle',
        '--platform=node',
        '--format=esm',
        '--target=node20',
        '--packages=external',
        `--outfile=${out}`,
        '--log-level=error',
      ]);
      if (r.status === 0) {
        if (!this.linked) {
          symlinkSync(resolve(ROOT, 'node_modules'), resolve(this.dir, 'node_modules'), 'dir');
          this.linked = true;
        }
        args = [out];
      }
    }
    this.cache.set(name, args);
    return args;
  }
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A running child with its stdout lines. */
export class Child {
  readonly process: ChildProcess;
  readonly exited: Promise<Exit>;
  stderr = '';
  lastLine = '';
  private exit: Exit | null = null;
  private readonly listeners = new Set<(line: string) => void>();

  constructor(args: string[], env: NodeJS.ProcessEnv = {}) {
    this.process = spawn(process.execPath, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
    this.process.stderr!.on('data', (d: Buffer) => {
      this.stderr = (this.stderr + d.toString()).slice(-8000);
    });
    createInterface({ input: this.process.stdout! }).on('line', (line) => {
      this.lastLine = line;
      for (const l of [...this.listeners]) l(line);
    });
    this.exited = new Promise((resolveExit) => {
      this.process.on('exit', (code, signal) => {
        this.exit = { code, signal };
        resolveExit(this.exit);
      });
      this.process.on('error', (err) => {
        this.stderr += String(err);
        this.exit = { code: -1, signal: null };
        resolveExit(this.exit);
      });
    });
  }

  get pid(): number {
    return this.process.pid ?? -1;
  }

  get running(): boolean {
    return this.exit === null;
  }

  onLine(fn: (line: string) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Resolves with the first line matching `pred`; rejects when the child exits first or after `timeoutMs`. */
  waitForLine(pred: (line: string) => boolean, timeoutMs: number, what = 'a line'): Promise<string> {
    return new Promise((resolveLine, reject) => {
      const timer = setTimeout(() => {
        off();
        reject(
          new Error(
            `timed out after ${timeoutMs} ms waiting for ${what} from pid ${this.pid}; stderr: ${this.stderr.slice(-1000)}`,
          ),
        );
      }, timeoutMs);
      const off = this.onLine((line) => {
        if (!pred(line)) return;
        clearTimeout(timer);
        off();
        resolveLine(line);
      });
      void this.exited.then((e) => {
        clearTimeout(timer);
        off();
        reject(
          new Error(
            `pid ${this.pid} exited (${e.code ?? e.signal}) before ${what}; stderr: ${this.stderr.slice(-1500)}`,
          ),
        );
      });
    });
  }

  signal(sig: NodeJS.Signals): boolean {
    if (!this.running) return false;
    try {
      return this.process.kill(sig);
    } catch {
      return false;
    }
  }

  /** SIGKILL and wait for the exit. */
  async kill(): Promise<void> {
    if (this.running) {
      this.signal('SIGCONT');
      this.signal('SIGKILL');
    }
    await this.exited;
  }
}

/** Polls `cond` until truthy (no fixed sleeps); rejects after `timeoutMs` naming `what`. */
export async function until<T>(
  cond: () => T | Promise<T>,
  timeoutMs: number,
  what: string,
  intervalMs = 20,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await delay(intervalMs);
  }
}

/** A pause for pacing fault injection (never used to wait for an outcome: that is `until`). */
export function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
