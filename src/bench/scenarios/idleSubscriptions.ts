import { join } from 'node:path';
import type { EventStore } from '../../core/eventStore.js';
import type { Subscription } from '../../core/subscription.js';
import { openPostgresStore } from '../../postgres/index.js';
import { openSqliteStore } from '../../sqlite/index.js';
import { writeBulkLog } from '../bulkLog.js';
import { baselineRow, round, row, type Timed } from '../measure.js';
import type { BenchRow, Scenario, ScenarioContext } from '../types.js';
import { newEvent, populate, streamOf } from '../workload.js';

const NAME = 'idle-subscriptions';
/** Concurrent appenders, one event per call: the store's group commit at full speed. */
const APPENDERS = 16;

/** A filter that matches no event of the workload (its streams are `invoice-*`). */
const nothing = (i: number) => ({ streamPrefixes: [`idle-${i}-`] });

interface Appended extends Timed {
  /** CPU time of this process (user + system) while appending, in ms. */
  cpuMs: number;
}

/** Appends for `ms` with `APPENDERS` callers of one event each; counts the events and this process's CPU. */
async function appendFor(store: EventStore, ms: number, from: number): Promise<Appended> {
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  const deadline = Date.now() + ms;
  let next = from;
  const worker = async (): Promise<void> => {
    while (Date.now() < deadline) {
      const i = next++;
      await store.append(streamOf(i), [newEvent(i)]);
    }
  };
  await Promise.all(Array.from({ length: APPENDERS }, worker));
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const used = process.cpuUsage(cpu);
  const events = next - from;
  return { events, seconds, eventsPerSec: events / seconds, cpuMs: (used.user + used.system) / 1000 };
}

/** Subscribes `count` idle subscriptions from the start and pulls their messages until closed. */
async function idleSubscriptions(
  store: EventStore,
  count: number,
): Promise<{ subs: Subscription[]; caughtUp: Promise<void>; done: Promise<void> }> {
  const subs: Subscription[] = [];
  const caught: Promise<void>[] = [];
  const loops: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    const sub = await store.subscribe(`idle_${i}_v1`, { filter: nothing(i), from: 'start' });
    subs.push(sub);
    let signal!: () => void;
    caught.push(new Promise<void>((resolve) => (signal = resolve)));
    loops.push(
      (async () => {
        for await (const m of sub) {
          if (m.kind === 'caught_up') signal();
          else throw new Error(`idle subscription ${i} got events`);
        }
      })(),
    );
  }
  return {
    subs,
    caughtUp: Promise.all(caught).then(() => undefined),
    done: Promise.all(loops).then(() => undefined),
  };
}

/**
 * The CPU the idle subscriptions cost while appends run at full speed: this process's CPU with them,
 * less its CPU without them scaled to the same number of events, as a share of one core.
 */
async function idleCost(ctx: ScenarioContext, label: string, store: EventStore): Promise<BenchRow[]> {
  const head = await store.headPosition();
  const subscriptions = ctx.size(100, 100, 1);
  const ms = ctx.quick ? 1_000 : 10_000;
  ctx.log(`${NAME} (${label}): warm-up appends`);
  let appended = (await appendFor(store, ms / 10, head)).events;
  ctx.log(`${NAME} (${label}): appends without subscriptions, ${ms} ms`);
  const without = await appendFor(store, ms, head + appended);
  appended += without.events;
  ctx.log(`${NAME} (${label}): ${subscriptions} subscriptions catching up on ${head + appended} events`);
  const started = process.hrtime.bigint();
  const idle = await idleSubscriptions(store, subscriptions);
  await idle.caughtUp;
  const catchUpSeconds = Number(process.hrtime.bigint() - started) / 1e9;
  ctx.log(`${NAME} (${label}): appends with ${subscriptions} idle subscriptions, ${ms} ms`);
  const withSubs = await appendFor(store, ms, head + appended);
  await Promise.all(idle.subs.map((s) => s.close()));
  await idle.done;
  const extraCpuMs = withSubs.cpuMs - without.cpuMs * (withSubs.events / without.events);
  const idlePercent = round((100 * Math.max(0, extraCpuMs)) / (withSubs.seconds * 1000), 1);
  const base = baselineRow(
    NAME,
    `${label}: appends without subscriptions (${APPENDERS} callers, 1 event/call)`,
    without,
    {
      cpuPercent: round((100 * without.cpuMs) / (without.seconds * 1000), 1),
    },
  );
  return [
    base,
    row({
      scenario: NAME,
      shape: `${label}: appends with ${subscriptions} idle subscriptions (filters match nothing) on a ${head}-event log; CPU they cost`,
      measured: withSubs,
      against: base,
      target: { text: 'idle subscriptions < 5% of one core', met: idlePercent < 5 },
      extra: {
        idleSubscriptionsCpuPercent: idlePercent,
        cpuPercent: round((100 * withSubs.cpuMs) / (withSubs.seconds * 1000), 1),
        catchUpSeconds: round(catchUpSeconds, 2),
      },
    }),
  ];
}

/** Lists 500 consumers (scaled), each `behind` positions behind the head (registered there, never run). */
async function listLag(
  ctx: ScenarioContext,
  label: string,
  store: EventStore,
  behind: number,
): Promise<BenchRow> {
  const head = await store.headPosition();
  const consumers = ctx.size(500, 500, 1);
  ctx.log(`${NAME} (${label}): ${consumers} consumers ${behind} positions behind`);
  for (let i = 0; i < consumers; i++) {
    const sub = await store.subscribe(`lag_${behind}_${i}_v1`, {
      filter: nothing(i),
      from: Math.max(0, head - behind),
    });
    await sub.close();
  }
  // The first listing warms the statements up.
  await store.consumers.list();
  const start = process.hrtime.bigint();
  const infos = await store.consumers.list();
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const mine = infos.filter((c) => c.name.startsWith(`lag_${behind}_`));
  if (mine.length !== consumers || mine.some((c) => c.lag !== 0))
    throw new Error(`${label}: listed ${mine.length} consumers, lags ${mine.map((c) => c.lag).join(',')}`);
  for (const c of mine) await store.consumers.delete(c.name);
  return row({
    scenario: NAME,
    shape: `${label}: consumers.list() of ${infos.length} consumers, ${consumers} of them ${behind} positions behind (filters match nothing)`,
    measured: { events: infos.length, seconds, eventsPerSec: infos.length / seconds },
    target: { text: '< 200 ms', met: seconds < 0.2 },
    extra: { listMs: round(seconds * 1000, 1) },
  });
}

/** Both measurements on one store. */
async function measure(ctx: ScenarioContext, label: string, store: EventStore): Promise<BenchRow[]> {
  const rows = await idleCost(ctx, label, store);
  rows.push(await listLag(ctx, label, store, 1_000));
  rows.push(await listLag(ctx, label, store, 10_000));
  return rows;
}

/** Scenario: idle narrow subscriptions beside appends at full speed, and listing many consumers. */
export const idleSubscriptionsScenario: Scenario = {
  name: NAME,
  description:
    '100 idle subscriptions whose filters match nothing, beside appends at full speed (CPU they cost), and consumers.list() of 500 consumers (lag), on SQLite and PostgreSQL',
  needs: ['postgres'],
  async run(ctx) {
    const n = ctx.size(20_000, 1_000_000, 1_000);
    const out: BenchRow[] = [];
    const dir = await ctx.tempDir();
    const path = join(dir, 'log.db');
    ctx.log(`${NAME}: writing a ${n}-event SQLite log`);
    await writeBulkLog(path, n);
    const sqlite = await openSqliteStore({ path });
    try {
      out.push(...(await measure(ctx, 'SQLite', sqlite)));
    } finally {
      await sqlite.close();
    }
    const pg = await openPostgresStore({ connectionString: await ctx.postgresDatabase() });
    try {
      ctx.log(`${NAME}: appending ${n} events to PostgreSQL`);
      await populate(pg, n);
      out.push(...(await measure(ctx, 'PostgreSQL', pg)));
    } finally {
      await pg.close();
    }
    return out;
  },
};
