import { fork, type ChildProcess } from 'node:child_process';
import pg from 'pg';
import type { EventStore } from '../../core/eventStore.js';
import { openPostgresStore } from '../../postgres/index.js';
import { PG_ENTITY_DDL } from '../billing.js';
import type { MemberCommand, MemberConfig, MemberMessage } from '../groupMemberChild.js';
import { baselineRow, round, row, type Timed } from '../measure.js';
import type { BenchRow, Scenario, ScenarioContext } from '../types.js';
import { streamPartition } from '../../core/streamHash.js';
import { newEvent, populate, streamOf } from '../workload.js';

const NAME = 'consumer-group';
const PARTITIONS = 16;
/** Events per transaction of the 1 ms handler's rows (and of the takeover's group). */
const WAIT_BATCH = { size: 50, catchUpSize: 50 };
/** Events per transaction of the PostgreSQL handler's rows. */
const PG_BATCH = { size: 500, catchUpSize: 500 };
/** The takeover row's lease TTL (a member that dies loses its partitions once it runs out). */
const TAKEOVER_TTL_MS = 2_000;
/**
 * The throughput rows' lease TTL (members rebalance every third of it): a member that joined before
 * the others holds more than its share until its next round.
 */
const ROW_TTL_MS = 3_000;
const POLL_MS = 20;
const TIMEOUT_MS = 900_000;

/** One member (or plain consumer) process; see groupMemberChild.ts for its IPC. */
class MemberProcess {
  readonly child: ChildProcess;
  readonly loaded: Promise<void>;
  readonly exited: Promise<number | null>;
  member = '';
  processed = 0;
  /**
   * The partitions it holds (index 0 for a consumer without partitions), as last reported: the
   * acknowledged position, and the one it first reported for the partition since it took it.
   */
  held = new Map<number, { first: number; position: number }>();
  private stderr = '';
  private failure: Error | null = null;
  private started: { resolve: () => void; reject: (err: Error) => void } | null = null;
  private stopped: (() => void) | null = null;

  constructor(config: MemberConfig) {
    // A sibling module: the .ts source under tsx (the child inherits the bench's loader), else the .js file.
    const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
    this.child = fork(new URL(`../groupMemberChild.${ext}`, import.meta.url), [JSON.stringify(config)], {
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    this.child.stderr?.on('data', (c: Buffer) => (this.stderr = (this.stderr + c.toString()).slice(-4000)));
    this.exited = new Promise((resolve) => this.child.on('exit', (code) => resolve(code)));
    this.loaded = new Promise<void>((resolve, reject) => {
      this.child.on('message', (m: MemberMessage) => {
        if (m.kind === 'loaded') resolve();
        else if (m.kind === 'started') {
          this.member = m.member;
          this.started?.resolve();
        } else if (m.kind === 'progress') {
          const held = new Map<number, { first: number; position: number }>();
          for (const [index, position] of m.held)
            held.set(index, { first: this.held.get(index)?.first ?? position, position });
          this.held = held;
        } else if (m.kind === 'stopped') {
          this.processed = m.processed;
          this.stopped?.();
        } else this.fail(new Error(`${NAME}: member process: ${m.message}`), reject);
      });
      void this.exited.then((code) =>
        this.fail(new Error(`${NAME}: member process exited (${code}): ${this.stderr}`), reject),
      );
    });
  }

  private fail(err: Error, reject: (err: Error) => void): void {
    this.failure ??= err;
    reject(err);
    this.started?.reject(err);
  }

  /** Throws what went wrong in the child, if anything did. */
  check(): void {
    if (this.failure) throw this.failure;
  }

  private tell(m: MemberCommand): void {
    if (this.child.connected) this.child.send(m);
  }

  /** Starts the consumer; resolves once it runs (its member id known). */
  go(): Promise<void> {
    const started = new Promise<void>((resolve, reject) => (this.started = { resolve, reject }));
    this.tell({ kind: 'go' });
    return started;
  }

  /** Stops the consumer and waits for the process to exit; returns the events it processed. */
  async close(): Promise<number> {
    const stopped = new Promise<void>((resolve) => (this.stopped = resolve));
    this.tell({ kind: 'close' });
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 30_000);
    await Promise.race([stopped.then(() => this.exited), this.exited]);
    clearTimeout(timer);
    return this.processed;
  }

  kill(): void {
    this.child.kill('SIGKILL');
  }
}

/**
 * Where each partition's events end (index 0 and the head for a consumer without partitions): it has
 * processed all of them once its acknowledged position reaches that.
 */
async function lastPositions(setup: Setup, partitions: number | undefined): Promise<Map<number, number>> {
  if (partitions === undefined) return new Map([[0, await setup.store.headPosition()]]);
  const r = await setup.pool.query<{ i: number; p: string }>(
    'SELECT (stream_hash % $1)::int AS i, max(position)::text AS p FROM idem.events GROUP BY 1',
    [partitions],
  );
  return new Map(r.rows.map((row) => [row.i, Number(row.p)]));
}

/** Whether, for every partition, some member reported a position at or past its last event. */
function caughtUp(last: ReadonlyMap<number, number>, procs: readonly MemberProcess[]): boolean {
  for (const [index, position] of last) {
    if (!procs.some((p) => (p.held.get(index)?.position ?? -1) >= position)) return false;
  }
  return true;
}

/** Every one of `count` partitions held, and every member holding some. */
function settled(count: number, procs: readonly MemberProcess[]): boolean {
  const held = new Set(procs.flatMap((p) => [...p.held.keys()]));
  return held.size === count && procs.every((p) => p.held.size > 0);
}

async function until(
  what: string,
  members: readonly MemberProcess[],
  done: () => boolean,
  timeoutMs = TIMEOUT_MS,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    for (const m of members) m.check();
    if (done()) return;
    if (Date.now() > deadline) {
      const held = members.map((m) => [...m.held].map(([i, h]) => `${i}@${h.position}`).join(' '));
      throw new Error(`${NAME}: ${what} not done within ${timeoutMs} ms; members hold: ${held.join(' | ')}`);
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

interface Setup {
  url: string;
  store: EventStore;
  pool: pg.Pool;
  events: number;
}

/**
 * One run of `members` processes over the same consumer name (a group when `partitions` is set),
 * timed from the moment they are told to start (each has loaded its modules and opened the store)
 * until every event is committed and acknowledged. A PostgreSQL handler's table is checked after.
 */
async function timeMembers(
  setup: Setup,
  base: Omit<MemberConfig, 'url'>,
  members: number,
): Promise<Timed & { settledSeconds: number }> {
  const { pool, events } = setup;
  await pool.query(`CREATE SCHEMA IF NOT EXISTS ${base.name}`);
  await pool.query('TRUNCATE entity_accounts');
  const last = await lastPositions(setup, base.partitions);
  const procs = Array.from({ length: members }, () => new MemberProcess({ ...base, url: setup.url }));
  try {
    await Promise.all(procs.map((p) => p.loaded));
    const t0 = process.hrtime.bigint();
    const since = (): number => Number(process.hrtime.bigint() - t0) / 1e9;
    await Promise.all(procs.map((p) => p.go()));
    let settledSeconds = 0;
    await until(`${base.name} catching up`, procs, () => {
      if (settledSeconds === 0 && settled(base.partitions ?? 1, procs)) settledSeconds = since();
      return caughtUp(last, procs);
    });
    const seconds = since();
    const processed = (await Promise.all(procs.map((p) => p.close()))).reduce((a, b) => a + b, 0);
    if (processed !== events)
      throw new Error(`${NAME}: ${base.name} processed ${processed} of ${events} events`);
    if (base.handler === 'pg') {
      const r = await pool.query<{ n: string }>(
        'SELECT coalesce(sum(events), 0)::text AS n FROM entity_accounts',
      );
      if (Number(r.rows[0]?.n) !== events)
        throw new Error(`${NAME}: ${base.name} counted ${r.rows[0]?.n} of ${events} events`);
    }
    return { events, seconds, eventsPerSec: events / seconds, settledSeconds };
  } finally {
    for (const p of procs) p.kill();
    await Promise.all(procs.map((p) => p.exited));
  }
}

/** A stream of the benchmark's workload whose events fall in partition `index` of PARTITIONS. */
function streamInPartition(index: number): string {
  for (let i = 0; ; i++) if (streamPartition(streamOf(i), PARTITIONS) === index) return streamOf(i);
}

/**
 * Takeover after a member's SIGKILL: 4 member processes share 16 partitions (1 ms handler, lease TTL
 * 2 s) with a backlog; one is killed, and the time runs from the kill until another member has
 * committed and acknowledged an event of one of the partitions the dead one held. A new member then
 * joins in its place before the next kill. Returns each takeover's time in ms.
 */
async function takeovers(setup: Setup, kills: number): Promise<number[]> {
  const { store, pool } = setup;
  const name = 'takeover_v1';
  await pool.query(`CREATE SCHEMA IF NOT EXISTS ${name}`);
  const config: MemberConfig = {
    url: setup.url,
    name,
    partitions: PARTITIONS,
    handler: 'wait',
    batch: WAIT_BATCH,
    leaseTtlMs: TAKEOVER_TTL_MS,
  };
  const join = async (): Promise<MemberProcess> => {
    const p = new MemberProcess(config);
    await p.loaded;
    await p.go();
    return p;
  };
  const members: MemberProcess[] = [];
  const all: MemberProcess[] = [];
  const times: number[] = [];
  try {
    for (let i = 0; i < 4; i++) {
      const m = await join();
      members.push(m);
      all.push(m);
    }
    for (let k = 0; k < kills; k++) {
      await until('the group settling', members, () => settled(PARTITIONS, members), 60_000);
      // A backlog in every partition, so that the dead member's partitions have events waiting.
      await populate(store, 3_200, { perCall: 16 });
      await new Promise((resolve) => setTimeout(resolve, 100));
      const victim = members.shift()!;
      const orphans = [...victim.held.keys()];
      if (orphans.length === 0) throw new Error(`${NAME}: the member to kill holds no partition`);
      victim.kill();
      const killedAt = performance.now();
      // And an event in each of its partitions, should it have caught up with the backlog already.
      await Promise.all(
        orphans.map((index) => {
          const stream = streamInPartition(index);
          return store.append(stream, [newEvent(index, 'v7')]);
        }),
      );
      // Taken over: a survivor holds one of them and has acknowledged past where it took it.
      await until(
        'a takeover',
        members,
        () =>
          members.some((m) =>
            orphans.some((i) => {
              const h = m.held.get(i);
              return h !== undefined && h.position > h.first;
            }),
          ),
        60_000,
      );
      times.push(performance.now() - killedAt);
      const fresh = await join();
      members.push(fresh);
      all.push(fresh);
    }
    return times;
  } finally {
    for (const p of all) p.kill();
    await Promise.all(all.map((p) => p.exited));
  }
}

/**
 * Consumer groups whose members run in separate processes (as deployed), against the same consumer
 * without partitions in one process, PostgreSQL store and target: (a) a handler that waits 1 ms per
 * event (a simulated remote call, the case groups exist for), 16 partitions and 4 members; (b) a
 * per-event PostgreSQL upsert through `ctx.tx`, 16 partitions and 2 members, each running its
 * partitions concurrently; (c) the takeover of a SIGKILLed member's partitions against the lease TTL
 * plus one batch.
 */
export const consumerGroup: Scenario = {
  name: NAME,
  description:
    'consumer groups with members in separate processes (1 ms handler: 4 members; PostgreSQL handler: 2 members) against one consumer, and takeover after a SIGKILL',
  needs: ['postgres'],
  async run(ctx: ScenarioContext) {
    const waitEvents = ctx.size(2_000, 20_000, 1000);
    const pgEvents = ctx.size(20_000, 100_000, 1000);
    const url = await ctx.postgresDatabase();
    const store = await openPostgresStore({ connectionString: url });
    const pool = new pg.Pool({ connectionString: url, max: 4 });
    try {
      await pool.query(PG_ENTITY_DDL);
      const out: BenchRow[] = [];

      ctx.log(`${NAME}: appending ${waitEvents} events`);
      await populate(store, waitEvents, { perCall: 10, ids: 'v7' });
      const waitSetup: Setup = { url, store, pool, events: waitEvents };
      const wait = { handler: 'wait', batch: WAIT_BATCH, leaseTtlMs: ROW_TTL_MS } as const;
      ctx.log(`${NAME}: 1 ms handler, one consumer process`);
      const plain = await timeMembers(waitSetup, { ...wait, name: 'wait_plain_v1' }, 1);
      ctx.log(`${NAME}: 1 ms handler, 16 partitions, 4 member processes`);
      const four = await timeMembers(
        waitSetup,
        { ...wait, name: 'wait_group_v1', partitions: PARTITIONS },
        4,
      );
      const plainRow = baselineRow(NAME, '1 ms handler: one consumer process, no partitions', plain);
      out.push(
        plainRow,
        row({
          scenario: NAME,
          shape: '1 ms handler: 16 partitions, 4 member processes',
          measured: four,
          against: plainRow,
          extra: { settledSeconds: round(four.settledSeconds, 2) },
          target: { text: '>= 3.5x one consumer', met: four.eventsPerSec >= 3.5 * plain.eventsPerSec },
        }),
      );

      ctx.log(`${NAME}: takeover after a SIGKILL`);
      const times = await takeovers(waitSetup, ctx.quick ? 1 : 3);
      // A partition's batch while the 4 members run all 16 partitions at once: WAIT_BATCH.size of its
      // events, at a sixteenth of the group's rate measured above.
      const batchMs = (WAIT_BATCH.size * PARTITIONS * 1000) / four.eventsPerSec;
      const bound = TAKEOVER_TTL_MS + batchMs;
      const worst = Math.max(...times);
      const total = times.reduce((a, b) => a + b, 0);
      out.push({
        scenario: NAME,
        shape: `takeover after a member's SIGKILL (4 member processes, 16 partitions, lease TTL ${TAKEOVER_TTL_MS} ms), ms`,
        baseline: false,
        // Its "events" are the kills, its seconds their takeover times added up (worst and mean below).
        events: times.length,
        seconds: round(total / 1000, 3),
        eventsPerSec: round((times.length * 1000) / total, 3),
        baselineShape: null,
        baselineEventsPerSec: null,
        ratio: null,
        target: `<= lease TTL + one batch (${Math.round(bound)} ms)`,
        met: worst <= bound,
        extra: {
          kills: times.length,
          worstTakeoverMs: Math.round(worst),
          meanTakeoverMs: Math.round(total / times.length),
          leaseTtlMs: TAKEOVER_TTL_MS,
          batchMs: Math.round(batchMs),
        },
      });

      ctx.log(`${NAME}: appending ${pgEvents} events for the PostgreSQL handler`);
      await populate(store, pgEvents, { perCall: 10, ids: 'v7' });
      // These consumers read the whole log: the events above too.
      const pgSetup: Setup = { url, store, pool, events: await store.headPosition() };
      const upsert = { handler: 'pg', batch: PG_BATCH, leaseTtlMs: ROW_TTL_MS } as const;
      ctx.log(`${NAME}: PostgreSQL handler, one consumer process`);
      const pgPlain = await timeMembers(pgSetup, { ...upsert, name: 'upsert_plain_v1' }, 1);
      ctx.log(`${NAME}: PostgreSQL handler, 16 partitions, 2 member processes`);
      const pgTwo = await timeMembers(
        pgSetup,
        { ...upsert, name: 'upsert_group_v1', partitions: PARTITIONS },
        2,
      );
      const pgPlainRow = baselineRow(
        NAME,
        'PostgreSQL handler: one consumer process, no partitions',
        pgPlain,
      );
      out.push(
        pgPlainRow,
        row({
          scenario: NAME,
          shape: 'PostgreSQL handler: 16 partitions, 2 member processes (partitions concurrent)',
          measured: pgTwo,
          against: pgPlainRow,
          extra: { settledSeconds: round(pgTwo.settledSeconds, 2) },
          target: { text: '>= 1.5x one consumer', met: pgTwo.eventsPerSec >= 1.5 * pgPlain.eventsPerSec },
        }),
      );
      return out;
    } finally {
      await pool.end();
      await store.close();
    }
  },
};
