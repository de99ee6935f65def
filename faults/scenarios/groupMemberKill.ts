/**
 * Consumer groups: three member processes share 16 partitions while events arrive; one member at a
 * time is SIGKILLed at a random moment and a new process joins in its place. The survivors take the
 * dead member's partitions once its leases run out; the epochs fence anything it left in flight.
 */
import { Child, ScriptRunner } from '../processes.js';
import { openSetup, type Backend } from '../stores.js';
import { emptyBody, type Scenario, type ScenarioBody, type ScenarioContext } from '../types.js';

const FILTER = { categories: ['invoice'] };
const CONSUMER = 'billing_group_faults_v1';
const PARTITIONS = 16;
const MEMBERS = 3;

export function groupMemberKillScenario(backend: Backend): Scenario {
  return {
    name: `group-member-sigkill-${backend}`,
    proves: `a consumer group of ${MEMBERS} member processes over ${PARTITIONS} partitions, a member SIGKILLed again and again and replaced, loses, doubles and reorders nothing (${backend} store + ${backend} target)`,
    postgres: backend === 'postgres',
    run: (ctx) => run(ctx, backend),
  };
}

interface Member {
  child: Child;
  id: string;
  processed: number;
  delivered: number;
  duplicates: number;
}

async function run(ctx: ScenarioContext, backend: Backend): Promise<ScenarioBody> {
  const full = ctx.size === 'full';
  const totalEvents = full ? 30_000 : 3_000;
  const kills = full ? 20 : 4;
  const streams = full ? 500 : 100;
  const r = ctx.random;
  const setup = await openSetup(backend, ctx.dir);
  const runner = new ScriptRunner(ctx.dir);
  const body = emptyBody();
  const members: Member[] = [];
  const finished: Member[] = [];
  const config = {
    store: setup.storeConfig,
    target: setup.targetConfig,
    consumer: CONSUMER,
    filter: FILTER,
    batchSize: 100,
    leaseTtlMs: 1000,
    partitions: PARTITIONS,
    until: 'signal' as const,
  };
  const start = async (): Promise<Member> => {
    const child = new Child([...runner.command('consumer'), JSON.stringify(config)]);
    const m: Member = { child, id: '', processed: 0, delivered: 0, duplicates: 0 };
    await new Promise<void>((ready, fail) => {
      child.onLine((line) => {
        if (line.startsWith('ready ')) {
          m.id = line.split(' ')[2] ?? '';
          ready();
        } else if (line.startsWith('m ')) {
          const [d, dup, p] = line.slice(2).split(' ').map(Number);
          m.delivered = d ?? 0;
          m.duplicates = dup ?? 0;
          m.processed = p ?? 0;
        }
      });
      void child.exited.then((exit) =>
        fail(new Error(`member exited with ${exit.code ?? exit.signal}: ${child.stderr.slice(-1500)}`)),
      );
    });
    return m;
  };
  let appended = 0;
  /** Appends `n` events to a random stream. */
  const append = async (n: number): Promise<void> => {
    await setup.store.append(
      `invoice-${r.int(1, streams)}`,
      Array.from({ length: n }, (_, i) => ({ type: 'invoice.line_added', data: { n: appended + i } })),
    );
    appended += n;
  };
  try {
    for (let i = 0; i < MEMBERS; i++) members.push(await start());
    const chunk = Math.ceil(totalEvents / (kills + 1));
    for (let k = 0; k <= kills; k++) {
      const until = Math.min(totalEvents, appended + chunk);
      while (appended < until) await append(Math.min(until - appended, r.int(1, 20)));
      if (k === kills) break;
      await untilEveryMemberWorked(members, append);
      const victim = members.splice(r.int(0, members.length - 1), 1)[0]!;
      await new Promise((resolve) => setTimeout(resolve, r.int(0, 300)));
      victim.child.signal('SIGKILL');
      await victim.child.exited;
      finished.push(victim);
      members.push(await start());
    }
    await untilEveryMemberWorked(members, append);
    // Every partition caught up with the head (the survivors took over what the dead held).
    const head = await setup.store.headPosition();
    const deadline = Date.now() + 300_000;
    for (;;) {
      const info = await setup.store.consumers.get(CONSUMER);
      if (info.partitions?.every((p) => p.lag === 0 || p.position >= head)) break;
      if (Date.now() > deadline) throw new Error('the group did not catch up within 300 s');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    for (const m of members) m.child.signal('SIGTERM');
    await Promise.all(members.map((m) => m.child.exited));
    finished.push(...members);
    const counts = await setup.count(CONSUMER, FILTER);
    body.events = appended;
    body.lost = counts.lost;
    body.doubled = counts.doubled;
    body.outOfOrder = counts.outOfOrder;
    for (const m of finished) {
      body.delivered += m.delivered;
      body.duplicates += m.duplicates;
    }
    body.faultCount = kills;
    body.faults = `${kills} member SIGKILLs, ${finished.length} member processes`;
    const worked = finished.filter((m) => m.processed > 0).length;
    body.notes.push(
      `${worked}/${finished.length} member processes processed events (per member: ${finished.map((m) => m.processed).join(', ')})`,
    );
    if (worked < finished.length)
      body.error = `only ${worked} of ${finished.length} member processes processed events`;
    return body;
  } finally {
    for (const m of members) m.child.signal('SIGKILL');
    await setup.close();
  }
}

/**
 * Appends one event at a time to random streams until every live member has processed an event (a
 * member that just joined holds no partition until the others hand some over), so that every member
 * process, killed or not, shows work in the report.
 */
async function untilEveryMemberWorked(
  members: readonly Member[],
  append: (n: number) => Promise<void>,
): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (members.some((m) => m.processed === 0)) {
    if (Date.now() > deadline) {
      const idle = members.filter((m) => m.processed === 0).map((m) => m.id);
      throw new Error(`members ${idle.join(', ')} processed no event within 60 s of joining`);
    }
    for (let i = 0; i < 16; i++) await append(1);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
