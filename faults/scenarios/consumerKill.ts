/**
 * Scenario 1: a consumer process SIGKILLed again and again, at chosen points (inside the handler, after
 * the target commit but before the ack, right after sending the ack) and at random moments, while events
 * keep arriving. Each life resumes from the acknowledged cursor; the ledger turns redeliveries into skips.
 */
import type { ConsumerChildConfig, KillPoint } from '../children/consumerChild.js';
import { Child, ScriptRunner } from '../processes.js';
import { openSetup, type Backend, type Setup } from '../stores.js';
import { emptyBody, type Scenario, type ScenarioBody, type ScenarioContext } from '../types.js';

const FILTER = { categories: ['invoice'] };
const CONSUMER = 'billing_faults_v1';

type Fault = KillPoint | 'timer';

export function consumerKillScenario(backend: Backend): Scenario {
  return {
    name: `consumer-sigkill-${backend}`,
    proves: `a consumer SIGKILLed in its handler, between commit and ack, and during the ack loses and doubles nothing (${backend} store + ${backend} target)`,
    postgres: backend === 'postgres',
    run: (ctx) => {
      const full = ctx.size === 'full';
      return runConsumerKills(ctx, backend, { events: full ? 50_000 : 2_000, kills: full ? 50 : 6 });
    },
  };
}

/** Where the consumer children read from besides the store itself: a JetStream durable fed by a relay. */
export interface KilledConsumerFeed {
  /** Merged into every child's config. */
  childConfig: Partial<ConsumerChildConfig>;
  /** Resolves once the feed holds every event the store has. */
  caughtUp(): Promise<void>;
}

export async function runConsumerKills(
  ctx: ScenarioContext,
  backend: Backend,
  size: { events: number; kills: number },
  feed?: (setup: Setup) => Promise<KilledConsumerFeed & { close(): Promise<void> }>,
): Promise<ScenarioBody> {
  const full = ctx.size === 'full';
  const totalEvents = size.events;
  const targetKills = size.kills;
  const streams = full ? 200 : 40;
  const r = ctx.random;
  const setup = await openSetup(backend, ctx.dir);
  const via = await feed?.(setup).catch(async (err: unknown) => {
    await setup.close();
    throw err;
  });
  const runner = new ScriptRunner(ctx.dir);
  const body = emptyBody();
  const kills: Record<Fault, number> = { handler: 0, 'after-commit': 0, 'during-ack': 0, timer: 0 };
  try {
    let appended = 0;
    // Each life that is to be killed gets fresh events, so every kill lands amid work.
    const chunk = Math.ceil(totalEvents / targetKills);
    const appendChunk = async (): Promise<void> => {
      const until = appended + chunk;
      while (appended < until) {
        const n = Math.min(until - appended, r.int(1, 20));
        const stream = `invoice-${r.int(1, streams)}`;
        await setup.store.append(
          stream,
          Array.from({ length: n }, (_, i) => ({ type: 'invoice.line_added', data: { n: appended + i } })),
        );
        appended += n;
      }
    };
    let totalKills = 0;
    let lives = 0;
    for (;;) {
      const inject = totalKills < targetKills;
      if (inject) await appendChunk();
      await via?.caughtUp();
      const fault: Fault | null = inject
        ? r.pick<Fault>(['handler', 'after-commit', 'during-ack', 'timer'])
        : null;
      const countdown = fault === 'handler' ? r.int(1, 250) : r.int(1, 4);
      const config = {
        store: setup.storeConfig,
        target: setup.targetConfig,
        consumer: CONSUMER,
        ...via?.childConfig,
        filter: FILTER,
        batchSize: 100,
        leaseTtlMs: 1000,
        standby: true,
        until: 'caught-up' as const,
        ...(fault && fault !== 'timer' ? { killAt: { point: fault, countdown } } : {}),
      };
      const timerMs = r.int(0, 300);
      lives++;
      const child = new Child([...runner.command('consumer'), JSON.stringify(config)]);
      let done = false;
      let last = { delivered: 0, duplicates: 0 };
      let timer: NodeJS.Timeout | undefined;
      child.onLine((line) => {
        if (line.startsWith('point ')) child.signal('SIGKILL');
        else if (line.startsWith('ready') && fault === 'timer')
          timer = setTimeout(() => child.signal('SIGKILL'), timerMs);
        else if (line === 'done') done = true;
        else if (line.startsWith('m ')) {
          const [d, dup] = line.slice(2).split(' ').map(Number);
          last = { delivered: d ?? 0, duplicates: dup ?? 0 };
        }
      });
      const watchdog = setTimeout(() => child.signal('SIGKILL'), 180_000);
      const exit = await child.exited;
      clearTimeout(watchdog);
      clearTimeout(timer);
      body.delivered += last.delivered;
      body.duplicates += last.duplicates;
      if (exit.signal === 'SIGKILL' && !done && fault) {
        kills[fault]++;
        totalKills++;
      } else if (exit.code !== 0 && exit.signal !== 'SIGKILL') {
        throw new Error(
          `consumer life ${lives} exited with ${exit.code ?? exit.signal}: ${child.stderr.slice(-1500)}`,
        );
      } else if (exit.signal === 'SIGKILL' && !fault) {
        throw new Error(`consumer life ${lives} was killed by the watchdog (no progress in 180 s)`);
      }
      if (done && !inject) break;
      if (lives > targetKills * 4 + 20) throw new Error(`no convergence after ${lives} lives`);
    }
    const counts = await setup.count(CONSUMER, FILTER);
    body.events = appended;
    body.lost = counts.lost;
    body.doubled = counts.doubled;
    body.outOfOrder = counts.outOfOrder;
    body.faultCount = totalKills;
    body.faults = `${totalKills} SIGKILL (${kills.handler} handler, ${kills['after-commit']} after-commit, ${kills['during-ack']} ack, ${kills.timer} random)`;
    body.notes.push(`${lives} lives`);
    return body;
  } finally {
    await via?.close();
    await setup.close();
  }
}
