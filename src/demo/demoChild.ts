// The demo's consumer process: `node demoChild.js <server url> <target.db> [kill-at position]`.
// Runs billing_v2 against the server (over `connect(url)`) into a SQLite target. Reads commands on stdin
// (`start`, `sync`, `stop`, `exit`), reports on stdout: `ready`, `m <metrics>`, `synced <metrics>`,
// `stopped <metrics>`, and `killing <position> <metrics>` right before it SIGKILLs itself when a commit
// reaches the kill-at position (after the commit, before the acknowledgement).
import { createInterface } from 'node:readline';
import type Database from 'better-sqlite3';
import { connect } from '../client/connect.js';
import type { TargetTransaction } from '../core/consumerTarget.js';
import { createConsumer, type Consumer } from '../consumer/consumer.js';
import { sqliteTarget } from '../sqlite/target.js';
import { BILLING_FILTER, BILLING_SCHEMA, CONSUMER_NAME, billingHandler } from './billingTarget.js';

type Db = Database.Database;

const [url, targetPath, killAtArg] = process.argv.slice(2);
if (!url || !targetPath) {
  process.stderr.write('usage: demoChild <server url> <target.db> [kill-at position]\n');
  process.exit(2);
}
const killAt = Number(killAtArg ?? 0);

const store = connect(url, { timeoutMs: 10_000 });

function metricsJson(): string {
  return JSON.stringify(consumer ? consumer.metrics() : null);
}

function say(line: string): void {
  // Pipes are written synchronously on Linux and macOS: the line is out before a SIGKILL that follows.
  process.stdout.write(`${line}\n`);
}

let consumer: Consumer | null = null;

/** The SQLite target, watched: after a commit whose checkpoint reaches `killAt`, the process kills itself. */
const target = sqliteTarget(targetPath, { durability: 'normal' });
target.db.exec(BILLING_SCHEMA);
const handle = billingHandler(target.db);
const transaction = target.transaction.bind(target);
target.transaction = async <T>(fn: (t: TargetTransaction<Db>) => Promise<T>): Promise<T> => {
  let recorded = null as number | null; // set by record() inside the transaction
  const result = await transaction((t) => {
    const record = t.record.bind(t);
    t.record = (consumerName, r) => {
      recorded = r.position;
      return record(consumerName, r);
    };
    return fn(t);
  });
  // Committed. The runtime acknowledges only once this returns: a kill here is a crash between commit and ack.
  if (killAt > 0 && recorded !== null && recorded >= killAt) {
    say(`killing ${recorded} ${metricsJson()}`);
    process.kill(process.pid, 'SIGKILL');
  }
  return result;
};

let reported = '';
const timer = setInterval(report, 20);

function report(): void {
  if (!consumer) return;
  const m = JSON.stringify(consumer.metrics());
  if (m !== reported) say(`m ${(reported = m)}`);
}

async function start(): Promise<void> {
  consumer = createConsumer({
    name: CONSUMER_NAME,
    source: store,
    target,
    filter: BILLING_FILTER,
    guard: ['event-id', 'entity-version'],
    gaps: 'recover',
    handle,
    batch: { size: 100, catchUpSize: 100 },
    // A restarted process may find the killed one's lease still held: wait for it instead of failing.
    standby: true,
    leaseTtlMs: 3000,
    reconnect: { initialDelayMs: 50, maxDelayMs: 500 },
  });
  await consumer.start();
  say('ready');
}

async function command(line: string): Promise<void> {
  if (line === 'start') await start();
  else if (line === 'sync') {
    await consumer?.whenCaughtUp({ timeoutMs: 30_000 });
    say(`synced ${metricsJson()}`);
  } else if (line === 'stop') {
    await consumer?.stop();
    say(`stopped ${metricsJson()}`);
  } else if (line === 'exit') {
    clearInterval(timer);
    await consumer?.stop();
    await store.close();
    await target.close();
    process.exit(0);
  }
}

function fail(what: string, err: unknown): never {
  process.stderr.write(
    `demo consumer: ${what}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
}

// Commands run one after another, in the order they arrive.
let queue: Promise<void> = start().catch((err: unknown) => fail('start', err));
createInterface({ input: process.stdin }).on('line', (line) => {
  const cmd = line.trim();
  queue = queue.then(() => command(cmd)).catch((err: unknown) => fail(cmd, err));
});
