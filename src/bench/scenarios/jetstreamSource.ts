import { fork, type ChildProcess } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { createConsumer } from '../../consumer/index.js';
import { DEFAULT_CATCH_UP_BATCH } from '../../consumer/options.js';
import { eventFromMessage, jetStreamSource } from '../../nats/index.js';
import { sqliteTarget } from '../../sqlite/index.js';
import { billingChange, sqliteBillingHandler } from '../billing.js';
import { CommitClock, monotonicMs } from '../commitClock.js';
import { timeConsumer } from '../consumerRun.js';
import { quantile, round, timed, type Timed } from '../measure.js';
import type { ParentMessage, ServerChildMessage } from '../liveServerChild.js';
import type { PacedSends } from '../pacedProducer.js';
import type { ScenarioContext } from '../types.js';
import { checkBilled, openTargetDb, preparedLoopTransaction, type BaselineItem } from './consumerSqlite.js';

/** Messages a raw consumer asks for at a time: as many as the source asks for under the consumer's defaults. */
const PULL = 1000;

/** What the JetStream rows share: one connection, and a fresh stream per measurement. */
export interface JetStreamBench {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** A new stream with subjects `<name>.>`, deleted after the scenario. */
  fresh(label: string): Promise<string>;
}

/**
 * Transport alone: a new durable with `ack_policy: all` consumes the stream's `n` messages, acking
 * every 500th and the last, and does nothing with them. Timed from the durable's creation, as the
 * source's subscription creates its own.
 */
export async function rawAckAll(
  b: JetStreamBench,
  stream: string,
  n: number,
  durable: string,
): Promise<Timed> {
  return timed(n, async () => {
    await b.jsm.consumers.add(stream, { durable_name: durable, ack_policy: 'all' });
    const consumer = await b.js.consumers.get(stream, durable);
    const messages = await consumer.consume({ max_messages: PULL });
    let got = 0;
    for await (const m of messages) {
      got++;
      if (got % 500 === 0 || got === n) m.ack();
      if (got === n) break;
    }
    await messages.close();
    await b.nc.flush();
  });
}

/**
 * Baseline: the work of the idem consumer written by hand on raw `@nats-io/jetstream`. A new durable
 * with `ack_policy: all` consumes the stream's `n` messages; each is read as the event it carries
 * (`eventFromMessage`, as the source reads it) and, per transaction of the consumer's catch-up size,
 * goes through the prepared-statement loop of `consumer-sqlite` (ledger check, billing upsert, ledger
 * insert, checkpoint) into a SQLite target (FULL); after each commit the transaction's last message is
 * acked, which acks the ones before it. Timed from the durable's creation to the last ack.
 */
export async function rawIntoSqlite(
  ctx: ScenarioContext,
  b: JetStreamBench,
  stream: string,
  n: number,
  durable: string,
): Promise<Timed> {
  const db = openTargetDb(await ctx.tempDir(), durable);
  try {
    const measured = await timed(n, async () => {
      // As many unacknowledged messages as the source's durables allow (JetStream's default, 1,000,
      // is less than a transaction).
      await b.jsm.consumers.add(stream, {
        durable_name: durable,
        ack_policy: 'all',
        max_ack_pending: 10_000,
      });
      const consumer = await b.js.consumers.get(stream, durable);
      const apply = preparedLoopTransaction(db, durable);
      const messages = await consumer.consume({ max_messages: PULL });
      let batch: BaselineItem[] = [];
      let got = 0;
      for await (const m of messages) {
        const e = eventFromMessage(m.headers, m.data);
        if (!e) throw new Error(`jetstream: message ${m.seq} is not an idem event`);
        batch.push({ id: e.id, position: e.position, c: billingChange(e) });
        got++;
        if (batch.length === DEFAULT_CATCH_UP_BATCH || got === n) {
          apply(batch);
          m.ack();
          batch = [];
        }
        if (got === n) break;
      }
      await messages.close();
      await b.nc.flush();
    });
    checkBilled(db, n, 'raw JetStream consumer into SQLite');
    return measured;
  } finally {
    db.close();
  }
}

/**
 * A billing consumer on `jetStreamSource` into a SQLite target (synchronous FULL), from the stream's
 * start to its head, on a new durable.
 */
export async function sourceIntoSqlite(
  ctx: ScenarioContext,
  b: JetStreamBench,
  stream: string,
  n: number,
  durable: string,
): Promise<Timed> {
  const db = openTargetDb(await ctx.tempDir(), durable);
  const target = sqliteTarget(db);
  const source = jetStreamSource({ connection: b.nc, stream, durable });
  try {
    const measured = await timeConsumer(
      { name: 'billing_jetstream_v1', source, target, handle: sqliteBillingHandler(db) },
      n,
    );
    checkBilled(db, n, 'consumer on jetStreamSource');
    return measured;
  } finally {
    await source.close();
    await target.close();
    db.close();
  }
}

/**
 * End to end at `rate` events/s: a child process appends to a SQLite store (durability full) and runs
 * the relay, as deployed beside the store; here a billing consumer on `jetStreamSource` commits the
 * events in a SQLite target. Latency: from the append call (in the child) to the commit of the event's
 * batch (here), on the machine's shared monotonic clock.
 */
export async function endToEnd(
  ctx: ScenarioContext,
  b: JetStreamBench,
  natsUrl: string,
  total: number,
  rate: number,
): Promise<{ timed: Timed; extra: Record<string, number> }> {
  const dir = await ctx.tempDir();
  const stream = await b.fresh('E2E');
  const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
  const child: ChildProcess = fork(
    new URL(`../relayChild.${ext}`, import.meta.url),
    [join(dir, 'e2e.db'), String(total), String(rate), natsUrl, stream],
    { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] },
  );
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const errors: unknown[] = [];
  let ready = false;
  let sent: (PacedSends & { ids: string[] }) | null = null;
  child.on('message', (m: ServerChildMessage) => {
    if (m.kind === 'ready') ready = true;
    else if (m.kind === 'sent') sent = m;
    else errors.push(new Error(`jetstream: relay process: ${m.message}`));
  });
  void exited.then((code) => errors.push(new Error(`jetstream: relay process exited (${code}): ${stderr}`)));
  const tell = (m: ParentMessage): void => void child.send(m);
  const source = jetStreamSource({ connection: b.nc, stream, durable: 'e2e' });
  const db = openTargetDb(dir, 'e2e-target');
  const clock = new CommitClock(sqliteTarget(db));
  const upsert = sqliteBillingHandler(db);
  const consumer = createConsumer({
    name: 'billing_e2e_v1',
    source,
    target: clock,
    guard: ['event-id', 'entity-version'],
    handle: (e, c) => {
      upsert(e, c);
      clock.mark(e.id);
    },
  });
  const wait = async (done: () => boolean, what: string): Promise<void> => {
    const deadline = Date.now() + 60_000;
    while (!done()) {
      if (errors.length > 0) throw errors[0] instanceof Error ? errors[0] : new Error(String(errors[0]));
      if (Date.now() > deadline) throw new Error(`jetstream: ${what} within 60 s`);
      await delay(2);
    }
  };
  try {
    await wait(() => ready, 'the relay process did not start');
    await consumer.start();
    tell({ kind: 'go' });
    await wait(() => sent !== null && clock.committed >= total, 'not every event reached the target');
    const s0 = sent!;
    const seconds = (monotonicMs() - s0.startMs) / 1000;
    const latencies = clock.latencies(s0.ids, s0.sentAt);
    // The first tenth warms up (JIT, statements prepared), not steady state.
    const s = latencies.slice(Math.floor(latencies.length / 10)).sort((x, y) => x - y);
    return {
      timed: { events: total, seconds, eventsPerSec: total / seconds },
      extra: {
        p50Ms: round(quantile(s, 0.5), 2),
        p95Ms: round(quantile(s, 0.95), 2),
        p99Ms: round(quantile(s, 0.99), 2),
      },
    };
  } finally {
    await consumer.stop();
    await source.close();
    await clock.close();
    db.close();
    if (child.connected) tell({ kind: 'close' });
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
}
