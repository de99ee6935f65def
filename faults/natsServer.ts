/** A nats-server of a scenario's own, with JetStream in a directory, stopped and started on one port. */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { tcpReachable } from '../test/support/services.js';
import { until } from './processes.js';

export const NATS_SERVER = process.env.IDEM_NATS_SERVER ?? '/usr/sbin/nats-server';

/** A port that was free a moment ago. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => (a && typeof a === 'object' ? resolve(a.port) : reject(new Error('no port'))));
    });
  });
}

export class OwnNatsServer {
  private proc: ChildProcess | null = null;
  private stderr = '';

  private constructor(
    readonly port: number,
    private readonly dir: string,
  ) {}

  static async start(dir: string): Promise<OwnNatsServer> {
    const s = new OwnNatsServer(await freePort(), dir);
    await s.start();
    return s;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const p = spawn(NATS_SERVER, ['-js', '-a', '127.0.0.1', '-p', String(this.port), '-sd', this.dir], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    p.stderr.on('data', (d: Buffer) => (this.stderr = (this.stderr + d.toString()).slice(-4000)));
    this.proc = p;
    await until(
      () => tcpReachable('127.0.0.1', this.port, 200),
      20_000,
      `nats-server on ${this.port}: ${this.stderr}`,
    );
  }

  /** Stops the server with `signal` and waits for its exit. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const p = this.proc;
    this.proc = null;
    if (!p || p.exitCode !== null) return;
    const exited = new Promise<void>((r) => p.once('exit', () => r()));
    p.kill(signal);
    await exited;
  }
}
