import { fork, type ChildProcess } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { connect } from '../../client/index.js';
import type { EventStore } from '../../core/eventStore.js';
import { createConsumer } from '../../consumer/index.js';
import { startServer } from '../../server/index.js';
import { openSqliteStore, sqliteTarget } from '../../sqlite/index.js';
import { billingChange, SQLITE_BILLING_UPSERT, sqliteBillingHandler } from '../billing.js';
import { CommitClock, monotonicMs } from '../commitClock.js';
import type { ParentMessage, ServerChildMessage } from '../liveServerChild.js';
import { baselineRow, quantile, round, row, type Timed } from '../measure.js';
import { pacedSends, type PacedSends } from '../pacedProducer.js';
import { RawSqliteEvents } from '../rawSqlite.js';
import type { BenchRow, Scenario, ScenarioContext } from '../types.js';
import { newEvent, rawRow, streamOf } from '../workload.js';
import { openTargetDb } from './consumerSqlite.js';

const NAME = 'live-latency';
const RATE = 1000;
/** Longest wait for the last events to be handled once every event was sent. */
const DRAIN_MS = 60_000;

interface Measured {
  timed: Timed;
  extra: Record<string, number>;
}

/** Drops the first tenth (warm-up: JIT, first statements prepared), not steady state. */
function steady(xs: readonly number[]): number[] {
  return xs.slice(Math.floor(xs.length / 10)).sort((a, b) => a - b);
}

/**
 * p50/p95/p99 of the latencies (in send order), and the p99 of how late the producer sent against
 * its schedule (`lateP99Ms`: time the producer was held up, which the latencies do not include).
 */
function figures(latencies: readonly number[], lateMs?: readonly number[]): Record<string, number> {
  const s = steady(latencies);
  const out: Record<string, number> = {
    p50Ms: round(quantile(s, 0.5), 2),
    p95Ms: round(quantile(s, 0.95), 2),
    p99Ms: round(quantile(s, 0.99), 2),
  };
  if (lateMs) out.lateP99Ms = round(quantile(steady(lateMs), 0.99), 2);
  return out;
}

/** Waits until `done()`, failing on the first recorded error or after `DRAIN_MS`. */
async function drain(done: () => boolean, errors: unknown[]): Promise<void> {
  const deadline = Date.now() + DRAIN_MS;
  while (!done()) {
    if (errors.length > 0) throw errors[0] instanceof Error ? errors[0] : new Error(String(errors[0]));
    if (Date.now() > deadline)
      throw new Error(`${NAME}: not every event reached the handler within ${DRAIN_MS / 1000} s`);
    await delay(2);
  }
}

function timedSince(startMs: number, events: number): Timed {
  const seconds = (monotonicMs() - startMs) / 1000;
  return { events, seconds, eventsPerSec: events / seconds };
}

/** Baseline: the least any design can do per event: commit the event row, then commit the handler's upsert. */
async function rawPair(ctx: ScenarioContext, total: number): Promise<Measured> {
  const dir = await ctx.tempDir();
  const events = new RawSqliteEvents(dir, 'raw-events');
  const target: Database.Database = openTargetDb(dir, 'raw-target');
  const upsert = target.prepare(SQLITE_BILLING_UPSERT);
  const latencies: number[] = [];
  try {
    const rows = Array.from({ length: total }, (_, i) => rawRow(i));
    const sends = await pacedSends(total, RATE, (i) => {
      const t0 = monotonicMs();
      const r = rows[i]!;
      events.write([r]);
      const c = billingChange({ type: r.type, data: JSON.parse(r.data) as never });
      target.transaction(() => upsert.run(c.customer, c.invoiced, c.paid))();
      latencies.push(monotonicMs() - t0);
    });
    return { timed: timedSince(sends.startMs, total), extra: figures(latencies) };
  } finally {
    events.close();
    target.close();
  }
}

/** The billing consumer reading through `source`, into a SQLite target whose commits are timed. */
async function withConsumer<T>(
  ctx: ScenarioContext,
  source: EventStore,
  run: (clock: CommitClock<Database.Database>) => Promise<T>,
): Promise<T> {
  const dir = await ctx.tempDir();
  const db = openTargetDb(dir, 'target');
  const clock = new CommitClock(sqliteTarget(db));
  const upsert = sqliteBillingHandler(db);
  const consumer = createConsumer({
    name: 'billing_live_v1',
    source,
    target: clock,
    guard: ['event-id', 'entity-version'],
    handle: (e, c) => {
      upsert(e, c);
      clock.mark(e.id);
    },
  });
  try {
    await consumer.start();
    return await run(clock);
  } finally {
    await consumer.stop();
    await clock.close();
    db.close();
  }
}

/** Appends through `producer` at 1,000/s in this process while a billing consumer reads through `source`. */
async function inProcess(
  ctx: ScenarioContext,
  total: number,
  producer: Pick<EventStore, 'append'>,
  source: EventStore,
): Promise<Measured> {
  return withConsumer(ctx, source, async (clock) => {
    const errors: unknown[] = [];
    const events = Array.from({ length: total }, (_, i) => newEvent(i));
    const sends = await pacedSends(total, RATE, (i) => {
      producer.append(streamOf(i), [events[i]!]).catch((err: unknown) => errors.push(err));
    });
    await drain(() => clock.committed >= total, errors);
    const timed = timedSince(sends.startMs, total);
    return {
      timed,
      extra: figures(
        clock.latencies(
          events.map((e) => e.id),
          sends.sentAt,
        ),
        sends.lateMs,
      ),
    };
  });
}

/** The server in a child process (as deployed), appending there at 1,000/s; the consumer here reads over its WebSocket. */
async function serverInChild(ctx: ScenarioContext, total: number): Promise<Measured> {
  const dir = await ctx.tempDir();
  // The child is a sibling module; under tsx it is the .ts source, when built the .js file.
  const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
  const child: ChildProcess = fork(
    new URL(`../liveServerChild.${ext}`, import.meta.url),
    [join(dir, 'idem.db'), String(total), String(RATE)],
    { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] },
  );
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const errors: unknown[] = [];
  let url: string | null = null;
  let sent: PacedSends & { ids: string[] } = { ids: [], startMs: 0, sentAt: [], lateMs: [] };
  let sentReceived = false;
  child.on('message', (m: ServerChildMessage) => {
    if (m.kind === 'ready') url = m.url;
    else if (m.kind === 'sent') {
      sent = m;
      sentReceived = true;
    } else errors.push(new Error(`${NAME}: server process: ${m.message}`));
  });
  void exited.then((code) => errors.push(new Error(`${NAME}: server process exited (${code}): ${stderr}`)));
  const tell = (m: ParentMessage): void => void child.send(m);
  try {
    await drain(() => url !== null, errors);
    const remote = connect(url!);
    try {
      return await withConsumer(ctx, remote, async (clock) => {
        tell({ kind: 'go' });
        await drain(() => sentReceived && clock.committed >= total, errors);
        const timed = timedSince(sent.startMs, total);
        return { timed, extra: figures(clock.latencies(sent.ids, sent.sentAt), sent.lateMs) };
      });
    } finally {
      await remote.close();
    }
  } finally {
    if (child.connected) tell({ kind: 'close' });
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

/** Scenario 5: live end-to-end latency at a steady 1,000 events/s, embedded and over the server's WebSocket. */
export const liveLatency: Scenario = {
  name: NAME,
  description: 'append -> committed handler output latency at 1,000 events/s, embedded and over WebSocket',
  needs: [],
  async run(ctx) {
    const total = ctx.size(2_000, 10_000);
    const out: BenchRow[] = [];

    // Two synchronous fsyncs per event cannot keep up with 1,000/s here, so the baseline runs fewer
    // events (it falls behind the schedule; its latency is its own service time per event).
    const rawTotal = Math.max(50, Math.round(total / 10));
    ctx.log(`${NAME}: baseline raw commit pair (${rawTotal} events at up to ${RATE}/s)`);
    const raw = await rawPair(ctx, rawTotal);
    const base = baselineRow(NAME, 'raw: commit event row, then commit upsert (FULL)', raw.timed, raw.extra);
    out.push(base);

    ctx.log(`${NAME}: embedded (${total} events at ${RATE}/s)`);
    {
      const dir = await ctx.tempDir();
      const store = await openSqliteStore({ path: join(dir, 'idem.db'), durability: 'full' });
      try {
        const r = await inProcess(ctx, total, store, store);
        out.push(
          row({
            scenario: NAME,
            shape: 'embedded SQLite store -> consumer -> SQLite target',
            measured: r.timed,
            against: base,
            target: { text: 'p99 < 10 ms', met: r.extra.p99Ms! < 10 },
            extra: r.extra,
          }),
        );
      } finally {
        await store.close();
      }
    }

    ctx.log(`${NAME}: over WebSocket, server in its own process (${total} events at ${RATE}/s)`);
    {
      const r = await serverInChild(ctx, total);
      out.push(
        row({
          scenario: NAME,
          shape: 'server process (append there) -> WebSocket -> consumer process -> SQLite target',
          measured: r.timed,
          against: base,
          target: { text: 'p99 < 20 ms', met: r.extra.p99Ms! < 20 },
          extra: r.extra,
        }),
      );
    }

    ctx.log(`${NAME}: over WebSocket, server in the consumer's process (${total} events at ${RATE}/s)`);
    {
      const dir = await ctx.tempDir();
      const store = await openSqliteStore({ path: join(dir, 'idem.db'), durability: 'full' });
      const server = await startServer({ store, port: 0 });
      const remote = connect(server.url);
      try {
        // Appends are made in the server's process (as its HTTP route does, minus HTTP); delivery and
        // acknowledgements cross the WebSocket. The same process also runs the consumer, so this shape
        // shows what sharing one event loop costs (see docs/benchmarks.md).
        const r = await inProcess(ctx, total, store, remote);
        out.push(
          row({
            scenario: NAME,
            shape: 'one process: append in server -> WebSocket -> consumer -> SQLite target',
            measured: r.timed,
            against: base,
            extra: r.extra,
          }),
        );
      } finally {
        await remote.close();
        await server.close();
        await store.close();
      }
    }
    return out;
  },
};
