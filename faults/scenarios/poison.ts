/**
 * Scenario 5: poison events. 1% of events make the handler throw; with `then: 'dead-letter'` each is
 * parked with its entity's later events behind it while everything else completes. After the handler is
 * fixed, `deadLetters.retry` (what `idem dlq retry` calls) applies the parked events in their original order.
 */
import { join } from 'node:path';
import { createConsumer } from '../../src/consumer/consumer.js';
import pg from 'pg';
import type { ConsumerTarget } from '../../src/core/consumerTarget.js';
import type { RecordedEvent } from '../../src/core/event.js';
import { postgresTarget } from '../../src/postgres/target.js';
import { sqliteTarget } from '../../src/sqlite/target.js';
import {
  countOutput,
  createPostgresOutput,
  createSqliteOutput,
  postgresRecord,
  readPostgresOutput,
  readSqliteOutput,
  sqliteRecorder,
  type AppliedRow,
} from '../output.js';
import { until } from '../processes.js';
import { openSetup, readEvents, type Backend, type Setup } from '../stores.js';
import { emptyBody, type Scenario, type ScenarioBody, type ScenarioContext } from '../types.js';

const FILTER = { categories: ['acct'] };
const CONSUMER = 'accounts_faults_v1';

export function poisonScenario(backend: Backend): Scenario {
  return {
    name: `poison-dead-letter-${backend}`,
    proves: `1% failing events are dead-lettered with their entity parked behind them; after a fix, retry applies them in order, nothing lost or doubled (${backend} store + ${backend} target)`,
    postgres: backend === 'postgres',
    run: (ctx) => run(ctx, backend),
  };
}

/** The target, how a handler records an applied event in it, and how the output is read back. */
interface PoisonOutput {
  target: ConsumerTarget<unknown>;
  record: (e: RecordedEvent, tx: unknown) => void | Promise<void>;
  read: () => Promise<{ applied: AppliedRow[]; entities: { disorder: number }[] }>;
  close: () => Promise<void>;
}

async function openOutput(setup: Setup, dir: string): Promise<PoisonOutput> {
  if (setup.storeConfig.kind === 'sqlite') {
    const target = sqliteTarget(join(dir, 'poison-target.db'), { durability: 'normal' });
    createSqliteOutput(target.db);
    const record = sqliteRecorder(target.db, CONSUMER);
    return {
      target: target,
      record: (e) => record(e),
      read: () => Promise.resolve(readSqliteOutput(target.db, CONSUMER)),
      close: () => target.close(),
    };
  }
  const pool = new pg.Pool({ connectionString: setup.storeConfig.url, max: 3 });
  pool.on('error', () => undefined);
  await createPostgresOutput(pool);
  const target = postgresTarget(pool);
  return {
    target: target,
    record: (e, tx) => postgresRecord(tx as pg.PoolClient, CONSUMER, e),
    read: () => readPostgresOutput(pool, CONSUMER),
    close: async () => {
      await target.close();
      await pool.end();
    },
  };
}

async function run(ctx: ScenarioContext, backend: Backend): Promise<ScenarioBody> {
  const total = ctx.size === 'full' ? 10_000 : 1_000;
  const r = ctx.random;
  const setup = await openSetup(backend, ctx.dir);
  const output = await openOutput(setup, ctx.dir);
  const { target } = output;
  const body = emptyBody();
  let broken = true;
  const poisoned = new Set<string>();
  const consumer = createConsumer({
    name: CONSUMER,
    source: setup.store,
    target,
    filter: FILTER,
    batch: { size: 100 },
    onError: { attempts: 2, backoff: 'none', then: 'dead-letter' },
    handle: async (e, hctx) => {
      if (broken && poisoned.has(e.id)) throw new Error(`poison event ${e.stream}@${e.version} (injected)`);
      await output.record(e, hctx.tx);
    },
  });
  try {
    for (let n = 0; n < total;) {
      const k = Math.min(total - n, r.int(1, 10));
      await setup.store.append(
        `acct-${r.int(1, 100)}`,
        Array.from({ length: k }, (_, i) => ({ type: 'acct.posted', data: { n: n + i } })),
      );
      n += k;
    }
    const events = await readEvents(setup.store, FILTER);
    for (const e of events) if (r.chance(0.01)) poisoned.add(e.id);
    // Which events must wait: each poisoned event and every later event of its stream.
    const firstPoison = new Map<string, number>();
    for (const e of events)
      if (poisoned.has(e.id) && !firstPoison.has(e.stream)) firstPoison.set(e.stream, e.version);
    const mustPark = events.filter((e) => (firstPoison.get(e.stream) ?? Infinity) <= e.version);
    await consumer.start();
    await consumer.whenCaughtUp({ timeoutMs: 120_000 });
    const parked = await setup.store.deadLetters.list(CONSUMER);
    const before = await output.read();
    const appliedIds = new Set(before.applied.map((a) => a.event_id));
    const wronglyApplied = mustPark.filter((e) => appliedIds.has(e.id)).length;
    const parkedIds = new Set(parked.map((d) => d.event.id));
    const notParked = mustPark.filter((e) => !parkedIds.has(e.id)).length;
    const waiting = new Set(mustPark.map((e) => e.id));
    const othersMissing = events.filter((e) => !waiting.has(e.id) && !appliedIds.has(e.id)).length;
    // The fix, then a retry per parked entity.
    broken = false;
    const streams = [...new Set(parked.map((d) => d.event.stream))];
    let retried = 0;
    for (const stream of streams) retried += await setup.store.deadLetters.retry(CONSUMER, { stream });
    await until(
      async () => (await setup.store.deadLetters.list(CONSUMER)).length === 0,
      120_000,
      'the dead letters to resolve',
    );
    await consumer.whenCaughtUp({ timeoutMs: 120_000 });
    const after = await output.read();
    const c = countOutput(events, after.applied, after.entities);
    const m = consumer.metrics();
    body.events = events.length;
    body.delivered = m.delivered;
    body.duplicates = m.duplicates;
    body.lost = c.lost;
    body.doubled = c.doubled;
    body.outOfOrder = c.outOfOrder;
    body.faultCount = poisoned.size;
    body.faults = `${poisoned.size} poison events (${firstPoison.size} entities)`;
    body.notes.push(`${parked.length} parked (${mustPark.length} expected), ${retried} retried`);
    const problems: string[] = [];
    if (wronglyApplied > 0)
      problems.push(`${wronglyApplied} events applied that should have waited behind a dead letter`);
    if (notParked > 0) problems.push(`${notParked} events neither applied nor parked before the retry`);
    if (othersMissing > 0) problems.push(`${othersMissing} healthy events missing before the retry`);
    if (parked.length !== mustPark.length)
      problems.push(`parked ${parked.length}, expected ${mustPark.length}`);
    if (problems.length > 0) body.error = problems.join('; ');
    return body;
  } finally {
    await consumer.stop();
    await output.close();
    await setup.close();
  }
}
