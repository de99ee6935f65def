// A fault-scenario consumer process: `node --import tsx consumerChild.ts '<json config>'`.
// It records every applied event in the target (faults/output.ts) inside the batch transaction.
// stdout lines: `ready <epoch>` once it owns the consumer; `m <delivered> <duplicates> <processed> <reconnects>`
// every 20 ms; `point <name>` when it reaches the configured kill point (it then blocks, waiting for the
// parent's SIGKILL); `state <state> <code>` when the runtime stops on its own (e.g. fenced); `done` after catching up.
import { writeSync } from 'node:fs';
import pg from 'pg';
import { createConsumer } from '../../src/consumer/consumer.js';
import type { ConsumerTarget } from '../../src/core/consumerTarget.js';
import type { ConsumerSource } from '../../src/core/consumerSource.js';
import type { EventStore } from '../../src/core/eventStore.js';
import type { EventFilter } from '../../src/core/filter.js';
import type { Subscription } from '../../src/core/subscription.js';
import { connect } from '../../src/client/connect.js';
import { jetStreamSource } from '../../src/nats/index.js';
import { openPostgresStore } from '../../src/postgres/postgresStore.js';
import { postgresTarget } from '../../src/postgres/target.js';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { sqliteTarget } from '../../src/sqlite/target.js';
import { createPostgresOutput, createSqliteOutput, postgresRecord, sqliteRecorder } from '../output.js';

export type KillPoint = 'handler' | 'after-commit' | 'during-ack';

export interface ConsumerChildConfig {
  store:
    { kind: 'sqlite'; path: string } | { kind: 'postgres'; url: string } | { kind: 'remote'; url: string };
  target: { kind: 'sqlite'; path: string } | { kind: 'postgres'; url: string };
  consumer: string;
  /** Read the events from this JetStream durable (written by a relay of `store`) instead of from the store. */
  jetstream?: { nats: string; stream: string; durable: string };
  filter?: EventFilter;
  batchSize?: number;
  leaseTtlMs?: number;
  standby?: boolean;
  /** Block at the `countdown`-th time the point is reached, announcing it, so the parent can SIGKILL there. */
  killAt?: { point: KillPoint; countdown: number };
  /** A consumer group member with this many partitions. */
  partitions?: number;
  /** Exit after catching up with the head, or run until SIGTERM. */
  until: 'caught-up' | 'signal';
}

const say = (line: string): void => {
  writeSync(1, `${line}\n`);
};

const config = JSON.parse(process.argv[2] ?? '{}') as ConsumerChildConfig;
let countdown = config.killAt?.countdown ?? 0;
const blocker = new Int32Array(new SharedArrayBuffer(4));
/** Reports the metrics just before blocking, so the parent's counts include the life's last work. */
let beforeBlock = (): void => undefined;

function reach(point: KillPoint): void {
  if (config.killAt?.point !== point || countdown <= 0) return;
  if (--countdown > 0) return;
  beforeBlock();
  say(`point ${point}`);
  // Block the whole process (like a stuck thread) until the parent's SIGKILL lands.
  Atomics.wait(blocker, 0, 0, 30_000);
}

const store: EventStore =
  config.store.kind === 'sqlite'
    ? await openSqliteStore({ path: config.store.path, durability: 'normal' })
    : config.store.kind === 'postgres'
      ? await openPostgresStore({ connectionString: config.store.url })
      : connect(config.store.url, { timeoutMs: 10_000 });

let pool: pg.Pool | null = null;
let target: ConsumerTarget<unknown>;
let handle: (e: Parameters<typeof postgresRecord>[2], tx: unknown) => void | Promise<void>;
if (config.target.kind === 'sqlite') {
  const t = sqliteTarget(config.target.path, { durability: 'normal', busyTimeoutMs: 30_000 });
  createSqliteOutput(t.db);
  const record = sqliteRecorder(t.db, config.consumer);
  handle = (e) => {
    record(e);
    reach('handler');
  };
  target = t;
} else {
  pool = new pg.Pool({ connectionString: config.target.url, max: 4 });
  pool.on('error', () => undefined);
  await createPostgresOutput(pool);
  handle = async (e, tx) => {
    await postgresRecord(tx as pg.PoolClient, config.consumer, e);
    reach('handler');
  };
  target = postgresTarget(pool);
}

/** The target with a kill point after each commit (before the runtime acknowledges). */
const hookedTarget: ConsumerTarget<unknown> = {
  kind: target.kind,
  migrate: () => target.migrate(),
  transaction: async (fn) => {
    const r = await target.transaction(fn);
    reach('after-commit');
    return r;
  },
  readCheckpoint: (c) => target.readCheckpoint(c),
  ledgerSize: (c) => target.ledgerSize(c),
  counterValue: (c) => target.counterValue(c),
  close: () => target.close(),
};

const natsSource = config.jetstream
  ? jetStreamSource({
      servers: config.jetstream.nats,
      stream: config.jetstream.stream,
      durable: config.jetstream.durable,
      recoverFrom: store,
      ackWaitMs: 2000,
    })
  : null;
const source: ConsumerSource = natsSource ?? store;

/** The source with a kill point right after each ack is sent (its outcome unknown to the consumer). */
const hookedSource: ConsumerSource = {
  ...(source.readStream && { readStream: (s, o) => source.readStream!(s, o) }),
  ...(source.readAll && { readAll: (o) => source.readAll!(o) }),
  headPosition: () => source.headPosition(),
  // An idem store stays one (consumer groups keep their members and partitions in it).
  ...(natsSource ? {} : { consumers: store.consumers, deadLetters: store.deadLetters }),
  subscribe: async (consumer, options) => {
    const sub = await source.subscribe(consumer, options);
    const hooked: Subscription = {
      get consumer() {
        return sub.consumer;
      },
      get epoch() {
        return sub.epoch;
      },
      get startPosition() {
        return sub.startPosition;
      },
      [Symbol.asyncIterator]: () => sub[Symbol.asyncIterator](),
      ack: (position) => {
        const p = sub.ack(position);
        reach('during-ack');
        return p;
      },
      park: (position, info) => sub.park(position, info),
      fail: (info) => sub.fail(info),
      outage: (active) => sub.outage(active),
      close: () => sub.close(),
    };
    return hooked;
  },
};

const consumer = createConsumer<unknown>({
  name: config.consumer,
  source: hookedSource,
  target: hookedTarget,
  ...(config.filter ? { filter: config.filter } : {}),
  // Catch-up batches merge up to three pages: faults land inside merged batches too, and batches stay many.
  batch: { size: config.batchSize ?? 100, catchUpSize: 3 * (config.batchSize ?? 100) },
  standby: config.standby ?? false,
  ...(config.leaseTtlMs !== undefined ? { leaseTtlMs: config.leaseTtlMs } : {}),
  ...(config.partitions !== undefined ? { partitions: config.partitions } : {}),
  reconnect: { initialDelayMs: 20, maxDelayMs: 500 },
  handle: (e, ctx) => handle(e, ctx.tx),
});

const report = (): void => {
  const m = consumer.metrics();
  say(`m ${m.delivered} ${m.duplicates} ${m.processed} ${m.reconnects}`);
};

async function shutdown(code: number): Promise<never> {
  clearInterval(timer);
  report();
  await consumer.stop().catch(() => undefined);
  await natsSource?.close().catch(() => undefined);
  await store.close().catch(() => undefined);
  await target.close().catch(() => undefined);
  await pool?.end().catch(() => undefined);
  process.exit(code);
}

beforeBlock = report;
let announced = false;
const timer = setInterval(() => {
  report();
  const s = consumer.status();
  if (!announced && (s.state === 'stopped' || s.state === 'failed') && s.lastError) {
    announced = true;
    say(`state ${s.state} ${s.lastError.code ?? s.lastError.name}`);
  }
}, 20);

process.on('SIGTERM', () => {
  void shutdown(0);
});

await consumer.start();
say(
  `ready ${consumer.status().epoch}${config.partitions !== undefined ? ` ${consumer.status().member}` : ''}`,
);
if (config.until === 'caught-up') {
  await consumer.whenCaughtUp({ timeoutMs: 300_000 });
  report();
  say('done');
  await shutdown(0);
}
