// The parent's handle on a demo consumer process: spawn, commands on stdin, reports from stdout.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { ConsumerMetricsSnapshot } from '../consumer/metrics.js';

/** One report line of the child. */
export interface ChildMessage {
  kind: 'ready' | 'm' | 'synced' | 'stopped' | 'killing';
  metrics: ConsumerMetricsSnapshot | null;
  /** `killing`: the checkpoint position of the batch committed just before the kill. */
  position?: number;
}

export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * The child script next to this module: `demoChild.js` in a build, `demoChild.ts` (run through tsx) when
 * this module itself runs from src/ under tsx.
 */
function childCommand(): string[] {
  const here = import.meta.url;
  if (here.endsWith('.ts')) {
    return ['--import', import.meta.resolve('tsx'), fileURLToPath(new URL('./demoChild.ts', here))];
  }
  return [fileURLToPath(new URL('./demoChild.js', here))];
}

export class ConsumerProcess {
  readonly messages: ChildMessage[] = [];
  readonly exited: Promise<ChildExit>;
  private exit: ChildExit | null = null;
  private stderr = '';
  private readonly listeners = new Set<() => void>();

  private constructor(private readonly child: ChildProcess) {
    child.stderr!.setEncoding('utf8').on('data', (s: string) => {
      this.stderr = (this.stderr + s).slice(-4000);
    });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const message = parse(line);
      if (message) {
        this.messages.push(message);
        this.notify();
      }
    });
    child.stdin!.on('error', () => undefined);
    this.exited = new Promise((resolve) => {
      child.once('close', (code, signal) => {
        this.exit = { code, signal };
        this.notify();
        resolve(this.exit);
      });
    });
  }

  static spawn(url: string, targetPath: string, killAt: number): ConsumerProcess {
    const child = spawn(process.execPath, [...childCommand(), url, targetPath, String(killAt)], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    return new ConsumerProcess(child);
  }

  get pid(): number {
    return this.child.pid ?? 0;
  }

  send(command: 'start' | 'sync' | 'stop' | 'exit'): void {
    this.child.stdin!.write(`${command}\n`);
  }

  /** The index the next message will get: pass it to `waitFor` to wait only for later messages. */
  mark(): number {
    return this.messages.length;
  }

  /** The latest metrics the child reported (any kind of message). */
  latest(): ConsumerMetricsSnapshot | null {
    for (let i = this.messages.length - 1; i >= 0; i--) {
      const m = this.messages[i]!.metrics;
      if (m) return m;
    }
    return null;
  }

  /** Resolves with the first message from index `from` on that `match` accepts; rejects if the child exits first or on timeout. */
  waitFor(
    from: number,
    match: (m: ChildMessage) => boolean,
    what: string,
    timeoutMs = 30_000,
  ): Promise<ChildMessage> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        for (let i = from; i < this.messages.length; i++) {
          const m = this.messages[i]!;
          if (match(m)) {
            done();
            resolve(m);
            return true;
          }
        }
        if (this.exit) {
          done();
          reject(
            new Error(
              `the consumer process exited (${this.exit.code ?? this.exit.signal}) while waiting for ${what}: ${this.stderr.trim()}`,
            ),
          );
          return true;
        }
        return false;
      };
      const timer = setTimeout(() => {
        done();
        reject(
          new Error(
            `timed out after ${timeoutMs} ms waiting for ${what} from the consumer process: ${this.stderr.trim()}`,
          ),
        );
      }, timeoutMs);
      const listener = (): void => void check();
      const done = (): void => {
        clearTimeout(timer);
        this.listeners.delete(listener);
      };
      if (!check()) this.listeners.add(listener);
    });
  }

  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }

  private notify(): void {
    for (const l of [...this.listeners]) l();
  }
}

function parse(line: string): ChildMessage | null {
  const space = line.indexOf(' ');
  const kind = space < 0 ? line : line.slice(0, space);
  const rest = space < 0 ? '' : line.slice(space + 1);
  try {
    if (kind === 'ready') return { kind, metrics: null };
    if (kind === 'm' || kind === 'synced' || kind === 'stopped')
      return { kind, metrics: JSON.parse(rest) as ConsumerMetricsSnapshot | null };
    if (kind === 'killing') {
      const at = rest.indexOf(' ');
      return {
        kind,
        position: Number(rest.slice(0, at)),
        metrics: JSON.parse(rest.slice(at + 1)) as ConsumerMetricsSnapshot | null,
      };
    }
  } catch {
    // Not a report line.
  }
  return null;
}
