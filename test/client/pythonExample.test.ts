// examples/python: a client written from docs/protocol.md, run as a child process against a real server
// on a real SQLite file, through a TCP proxy that cuts its WebSockets mid-frame and loses append replies.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { startTestServer } from '../server/serverFixture.js';
import { randomSuffix } from '../support/names.js';
import { requirePythonOrSkip } from '../support/services.js';
import { tempDir } from '../support/tempDir.js';

const SCRIPT = fileURLToPath(new URL('../../examples/python/idem_client.py', import.meta.url));

interface ProxyRules {
  /**
   * Cut WebSocket connections, each once the server has sent it `cutAfterBytes` (so mid-frame), until
   * `webSocketCuts` were cut; a connection that ends sooner does not count.
   */
  webSocketCuts: number;
  cutAfterBytes: number;
  /** Which POST requests (1-based, in arrival order) lose their reply: forwarded, reply dropped. */
  dropReplyOfPosts: ReadonlySet<number>;
}

/** A TCP proxy to the server that breaks connections by the rules, the way a failing network would. */
class FaultyProxy {
  webSocketsCut = 0;
  repliesDropped = 0;
  private posts = 0;
  private readonly sockets = new Set<Socket>();
  private constructor(
    private readonly server: Server,
    private readonly rules: ProxyRules,
  ) {}

  static async start(upstreamPort: number, rules: ProxyRules): Promise<{ proxy: FaultyProxy; url: string }> {
    // eslint-disable-next-line prefer-const -- assigned once the server exists; connections come later.
    let proxy!: FaultyProxy;
    const server = createServer((client) => proxy.relay(client, upstreamPort));
    proxy = new FaultyProxy(server, rules);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    return { proxy, url: `http://127.0.0.1:${port}` };
  }

  private relay(client: Socket, upstreamPort: number): void {
    const upstream = connect({ host: '127.0.0.1', port: upstreamPort });
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
    };
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        this.sockets.delete(s);
        drop();
      });
    }
    // The request line decides the rule: it arrives in the client's first bytes.
    let head = '';
    let rule: 'watch' | 'drop' | 'pass' | null = null;
    let budget = this.rules.cutAfterBytes;
    client.on('data', (chunk: Buffer) => {
      if (rule === null) {
        head += chunk.toString('latin1');
        if (head.includes('\r\n')) {
          if (head.startsWith('GET /v1/subscribe')) rule = 'watch';
          else if (head.startsWith('POST ') && this.rules.dropReplyOfPosts.has(++this.posts)) {
            this.repliesDropped++;
            rule = 'drop';
          } else rule = 'pass';
        }
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      // The client already left (it dropped the connection itself): nothing to deliver or cut.
      if (client.destroyed) return;
      if (rule === 'drop') return drop();
      if (rule !== 'watch' || chunk.length < budget || this.webSocketsCut >= this.rules.webSocketCuts) {
        budget -= chunk.length;
        client.write(chunk);
        return;
      }
      this.webSocketsCut++;
      client.write(chunk.subarray(0, budget), drop);
    });
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

function runPython(
  python: string,
  args: string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(python, [SCRIPT, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    // A hung client fails the test with its output instead of waiting for the runner's timeout.
    const timer = setTimeout(() => child.kill('SIGKILL'), 180_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const found = await requirePythonOrSkip();

describe(
  'examples/python (a client written from docs/protocol.md)',
  {
    skip: 'skip' in found ? found.skip : false,
  },
  () => {
    it('appends, reads and consumes into its own SQLite exactly once through cuts, aborts and lost replies', async (t) => {
      const python = 'python' in found ? found.python : '';
      const server = await startTestServer();
      const dir = tempDir();
      const { proxy, url } = await FaultyProxy.start(Number(new URL(server.url).port), {
        webSocketCuts: 3,
        cutAfterBytes: 8_000,
        // One append before consuming and one of the live appends, made while the consumer runs.
        dropReplyOfPosts: new Set([3, 125]),
      });
      try {
        const prefix = `pyex-${randomSuffix()}-`;
        const consumer = `py_example_${randomSuffix()}_v1`;
        const db = dir.file('consumer.db');
        const { code, stdout, stderr } = await runPython(python, [
          ...['--url', url, '--db', db, '--prefix', prefix, '--consumer', consumer],
          ...['--streams', '10', '--events-per-stream', '60', '--live-events-per-stream', '20'],
          ...['--batch-size', '25', '--abort-after-batches', '2,7'],
        ]);
        assert.equal(code, 0, `exit ${code}\n${stderr}\n${stdout}`);
        const summary = JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, number | boolean>;
        t.diagnostic(`python client: ${JSON.stringify(summary)}`);
        assert.equal(summary.ok, true);
        assert.equal(summary.events, 800);
        // Every fault happened, and each was survived.
        assert.deepEqual([proxy.webSocketsCut, proxy.repliesDropped], [3, 2], stderr);
        assert.deepEqual([summary.append_retries, summary.duplicate_appends], [2, 2], stderr);
        assert.equal(summary.self_aborts, 2);
        // A cut can land on a connection the client is dropping itself at that moment, so at least four.
        assert.ok(Number(summary.reconnects) >= 4, `reconnects ${summary.reconnects}\n${stderr}`);
        assert.equal(summary.connections, Number(summary.reconnects) + 1);
        assert.ok(Number(summary.redelivered_skipped) > 0, 'batches committed but not acked came again');
        assert.equal(summary.applied, 800);

        // Exactly once, checked here against the store, not only by the client itself.
        const events = [];
        for await (const e of server.store.readAll({ filter: { streamPrefixes: [prefix] } })) events.push(e);
        assert.equal(events.length, 800, 'the lost replies were not appended twice');
        const sqlite = new Database(db, { readonly: true });
        try {
          const ledger = sqlite
            .prepare('SELECT event_id AS id, position FROM ledger ORDER BY position')
            .all();
          assert.deepEqual(
            ledger,
            events.map((e) => ({ id: e.id, position: e.position })),
          );
          const totals = new Map<string, { invoices: number; amount: number }>();
          for (const e of events) {
            const t = totals.get(e.stream) ?? { invoices: 0, amount: 0 };
            totals.set(e.stream, {
              invoices: t.invoices + 1,
              amount: t.amount + (e.data as { amount: number }).amount,
            });
          }
          const rows = sqlite
            .prepare('SELECT stream, invoices, amount FROM totals ORDER BY stream')
            .all() as {
            stream: string;
            invoices: number;
            amount: number;
          }[];
          assert.deepEqual(
            rows,
            [...totals].sort(([a], [b]) => (a < b ? -1 : 1)).map(([stream, t]) => ({ stream, ...t })),
          );
          const checkpoint = sqlite
            .prepare('SELECT position FROM checkpoint WHERE consumer = ?')
            .get(consumer);
          const info = await server.store.consumers.get(consumer);
          assert.deepEqual(checkpoint, { position: events.at(-1)!.position });
          assert.deepEqual([info.position, info.status], [events.at(-1)!.position, 'stopped']);
        } finally {
          sqlite.close();
        }
      } finally {
        await proxy.close();
        await server.cleanup();
        await dir.cleanup();
      }
    });
  },
);
