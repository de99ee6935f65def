import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { EventStore } from '../../core/eventStore.js';
import type { Subscription } from '../../core/subscription.js';
import { openPostgresStore } from '../../postgres/index.js';
import { openSqliteStore } from '../../sqlite/index.js';
import type { AppenderCommand, AppenderMessage } from '../appenderChild.js';
import { writeBulkLog } from '../bulkLog.js';
import { baselineRow, quantile, round, row, type Timed } from '../measure.js';
import type { BenchRow, Scenario, ScenarioContext } from '../types.js';
import { newEvent, populate, streamOf } from '../workload.js';

const NAME = 'idle-subscriptions';
/** Concurrent appenders, one event per call: the store's group commit at full speed. */
const APPENDERS = 16;

/** A filter that matches no event of the workload (its streams are `invoice-*`). */
const nothing = (i: number) => ({ streamPrefixes: [`idle-${i}-`] });

export interface Appended extends Timed {
  /** CPU time of this process (user + system) while appending, in ms. */
  cpuMs: number;
}

/** Appends for `ms` with `APPENDERS` callers of one event each; counts the events and this process's CPU. */
export async function appendFor(store: EventStore, ms: number, from: number): Promise<Appended> {
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

/** Where the scenario's store is, for a process of its own to open it too. */
interface StoreLocation {
  kind: 'sqlite' | 'postgres';
  /** The SQLite file, or the PostgreSQL connection string. */
  location: string;
}

/**
 * Appends for `ms` from a child process (appenderChild.ts) to the store at `where`, as `appendFor`
 * does here; answers what it appended and the CPU this process used meanwhile.
 */
async function appendsApart(
  where: StoreLocation,
  ms: number,
  from: number,
): Promise<Appended & { hereCpuMs: number; hereSeconds: number }> {
  // A sibling module: the .ts source under tsx (the child inherits the bench's loader), else the .js file.
  const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
  const child: ChildProcess = fork(
    new URL(`../appenderChild.${ext}`, import.meta.url),
    [where.kind, where.location],
    {
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    },
  );
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4000)));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const send = (m: AppenderCommand): void => void child.send(m);
  try {
    const messages: AppenderMessage[] = [];
    let heard: (() => void) | undefined;
    child.on('message', (m: AppenderMessage) => {
      messages.push(m);
      heard?.();
    });
    const next = async (): Promise<AppenderMessage> => {
      while (messages.length === 0) {
        await Promise.race([
          new Promise<void>((resolve) => (heard = resolve)),
          exited.then((code) => {
            throw new Error(`${NAME}: appender process exited (${code}): ${stderr}`);
          }),
        ]);
      }
      const m = messages.shift()!;
      if (m.kind === 'error') throw new Error(`${NAME}: appender process: ${m.message}`);
      return m;
    };
    await next();
    const cpu = process.cpuUsage();
    const start = process.hrtime.bigint();
    send({ kind: 'go', ms, from });
    const done = await next();
    const used = process.cpuUsage(cpu);
    const hereSeconds = Number(process.hrtime.bigint() - start) / 1e9;
    if (done.kind !== 'done') throw new Error(`${NAME}: appender process said ${done.kind}`);
    return { ...done, hereCpuMs: (used.user + used.system) / 1000, hereSeconds };
  } finally {
    if (child.connected) send({ kind: 'close' });
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
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

/** Several measurements of `appendFor` as one: their events, seconds and CPU added up. */
function together(phases: readonly Appended[]): Appended {
  const events = phases.reduce((n, a) => n + a.events, 0);
  const seconds = phases.reduce((n, a) => n + a.seconds, 0);
  const cpuMs = phases.reduce((n, a) => n + a.cpuMs, 0);
  return { events, seconds, eventsPerSec: events / seconds, cpuMs };
}

/**
 * The CPU the idle subscriptions cost while appends run at full speed: this process's CPU with them,
 * less its CPU without them scaled to the same number of events, as a share of one core. Phases
 * without them and with them alternate (closed, then subscribed again), and each phase with them is
 * read against the phases without them right before and after it, together: the CPU per appended
 * event drifts as the store grows (a growing id index in a fixed page cache) and moves in spells of
 * tens of seconds by a fifth either way, with or without subscriptions, so a phase before alone would
 * count the drift, and a single pair of phases a spell, as the subscriptions' cost. The row gives the
 * median of the cycles.
 */
async function idleCost(
  ctx: ScenarioContext,
  label: string,
  store: EventStore,
  where: StoreLocation,
): Promise<BenchRow[]> {
  const head = await store.headPosition();
  const subscriptions = ctx.size(100, 100, 1);
  const ms = ctx.quick ? 1_000 : 10_000;
  const phaseMs = ctx.quick ? 1_000 : 5_000;
  const cycles = ctx.quick ? 1 : 3;
  // Appends after the subscriptions caught up, before the timed phase: longer than the second after
  // which the store stops hearing other processes' commits (`QUIET_MS`). A quick run only checks
  // that the scenario runs.
  const settleMs = ctx.quick ? 200 : 3_000;
  ctx.log(`${NAME} (${label}): warm-up appends`);
  let appended = (await appendFor(store, ms / 10, head)).events;
  const phase = async (what: string, phaseLength: number): Promise<Appended> => {
    ctx.log(`${NAME} (${label}): ${what}, ${phaseLength} ms`);
    const a = await appendFor(store, phaseLength, head + appended);
    appended += a.events;
    return a;
  };
  const without = [await phase('appends without subscriptions', phaseMs)];
  const withSubs: Appended[] = [];
  const settling: Appended[] = [];
  let catchUpSeconds = 0;
  for (let c = 1; c <= cycles; c++) {
    ctx.log(`${NAME} (${label}): cycle ${c}/${cycles}: ${subscriptions} subscriptions catching up`);
    const started = process.hrtime.bigint();
    const idle = await idleSubscriptions(store, subscriptions);
    await idle.caughtUp;
    if (c === 1) catchUpSeconds = Number(process.hrtime.bigint() - started) / 1e9;
    // Caught up, the subscriptions wait for appends (on PostgreSQL, LISTEN is on): the first appends
    // wake each of them to read once, find only left-out events and rest, and other processes'
    // commits stop being heard a second later. That change happens when appends start after they
    // subscribe (in every cycle); the row measures them once idle, and reports the change's cost apart.
    settling.push(await phase(`appends while ${subscriptions} subscriptions settle`, settleMs));
    withSubs.push(await phase(`appends with ${subscriptions} idle subscriptions`, phaseMs));
    await Promise.all(idle.subs.map((s) => s.close()));
    await idle.done;
    without.push(await phase('appends without subscriptions', phaseMs));
  }
  ctx.log(`${NAME} (${label}): ${subscriptions} subscriptions resuming`);
  const again = await idleSubscriptions(store, subscriptions);
  await again.caughtUp;
  ctx.log(
    `${NAME} (${label}): another process appends while ${subscriptions} subscriptions settle, ${settleMs} ms`,
  );
  const apartSettling = await appendsApart(where, settleMs, head + appended);
  appended += apartSettling.events;
  ctx.log(`${NAME} (${label}): another process appends beside ${subscriptions} idle subscriptions, ${ms} ms`);
  const apart = await appendsApart(where, ms, head + appended);
  await Promise.all(again.subs.map((s) => s.close()));
  await again.done;
  const both = together(without);
  const percents = withSubs
    .map((w, c) => {
      const around = together([without[c]!, without[c + 1]!]);
      const extraCpuMs = w.cpuMs - around.cpuMs * (w.events / around.events);
      return round((100 * Math.max(0, extraCpuMs)) / (w.seconds * 1000), 1);
    })
    .sort((a, b) => a - b);
  const idlePercent = quantile(percents, 0.5);
  const measured = together(withSubs);
  // Nothing else runs in this process meanwhile: its CPU is the subscriptions' own.
  const ownPercent = (a: { hereCpuMs: number; hereSeconds: number }): number =>
    round((100 * a.hereCpuMs) / (a.hereSeconds * 1000), 1);
  const apartPercent = ownPercent(apart);
  const microsPerEvent = (a: Appended): number => round((1000 * a.cpuMs) / a.events, 1);
  const withoutMicros = without.map(microsPerEvent).sort((a, b) => a - b);
  const base = baselineRow(
    NAME,
    `${label}: appends without subscriptions (${APPENDERS} callers, 1 event/call), before, between and after the phases with them`,
    both,
    {
      cpuPercent: round((100 * both.cpuMs) / (both.seconds * 1000), 1),
      cpuMicrosPerEventLowest: withoutMicros[0]!,
      cpuMicrosPerEventHighest: withoutMicros[withoutMicros.length - 1]!,
    },
  );
  return [
    base,
    row({
      scenario: NAME,
      shape: `${label}: appends with ${subscriptions} idle subscriptions (filters match nothing) on a ${head}-event log; CPU they cost`,
      measured,
      against: base,
      target: { text: 'idle subscriptions < 5% of one core', met: idlePercent < 5 },
      extra: {
        idleSubscriptionsCpuPercent: idlePercent,
        idleSubscriptionsCpuPercentLowest: percents[0]!,
        idleSubscriptionsCpuPercentHighest: percents[percents.length - 1]!,
        cycles,
        cpuPercent: round((100 * measured.cpuMs) / (measured.seconds * 1000), 1),
        cpuMicrosPerEvent: microsPerEvent(measured),
        catchUpSeconds: round(catchUpSeconds, 2),
        cpuMicrosPerEventSettling: microsPerEvent(together(settling)),
      },
    }),
    row({
      scenario: NAME,
      shape: `${label}: the same ${subscriptions} idle subscriptions while another process appends (${APPENDERS} callers, 1 event/call); CPU of their process`,
      measured: apart,
      target: { text: 'idle subscriptions < 5% of one core', met: apartPercent < 5 },
      extra: {
        idleSubscriptionsCpuPercent: apartPercent,
        settlingCpuPercent: ownPercent(apartSettling),
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
async function measure(
  ctx: ScenarioContext,
  label: string,
  store: EventStore,
  where: StoreLocation,
): Promise<BenchRow[]> {
  const rows = await idleCost(ctx, label, store, where);
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
      out.push(...(await measure(ctx, 'SQLite', sqlite, { kind: 'sqlite', location: path })));
    } finally {
      await sqlite.close();
    }
    const url = await ctx.postgresDatabase();
    const pg = await openPostgresStore({ connectionString: url });
    try {
      ctx.log(`${NAME}: appending ${n} events to PostgreSQL`);
      await populate(pg, n);
      out.push(...(await measure(ctx, 'PostgreSQL', pg, { kind: 'postgres', location: url })));
    } finally {
      await pg.close();
    }
    return out;
  },
};
