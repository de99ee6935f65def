/**
 * Scenario 4: split brain. The owning consumer process is frozen with SIGSTOP past its lease; a standby
 * process takes over (higher epoch); the old owner is resumed with SIGCONT. Its acks and commits must be
 * fenced, and the shared target must hold every event exactly once, in entity order.
 */
import Database from 'better-sqlite3';
import type { ConsumerChildConfig } from '../children/consumerChild.js';
import { Child, ScriptRunner, delay, until } from '../processes.js';
import { openSetup, type Backend } from '../stores.js';
import { emptyBody, type Scenario, type ScenarioBody, type ScenarioContext } from '../types.js';

const FILTER = { categories: ['ledger'] };
const CONSUMER = 'ledger_faults_v1';
const LEASE_TTL_MS = 1000;
/** How long a probe waits for a SQLite file's write lock (a commit of the live processes takes milliseconds). */
const LOCK_PROBE_MS = 1_000;

/**
 * True when another process holds `file`'s write lock for longer than `LOCK_PROBE_MS`. A process
 * frozen inside a SQLite write transaction keeps that lock: until it resumes no other process can
 * write the file, so no standby can take over (SQLite has one writer per file; PostgreSQL has no
 * such lock).
 */
function writeLocked(file: string): boolean {
  const db = new Database(file, { timeout: LOCK_PROBE_MS });
  try {
    db.exec('BEGIN IMMEDIATE');
    db.exec('ROLLBACK');
    return false;
  } catch (err) {
    if ((err as { code?: string }).code === 'SQLITE_BUSY') return true;
    throw err;
  } finally {
    db.close();
  }
}

export function splitBrainScenario(backend: Backend): Scenario {
  const label = backend === 'sqlite' ? 'SQLite' : 'PostgreSQL';
  return {
    name: `split-brain-sigstop-${backend}`,
    proves: `an owner frozen past its lease is fenced when it resumes; the standby that took over doubles nothing (${label} store + shared ${label} target)`,
    postgres: backend === 'postgres',
    run: (ctx) => run(ctx, backend),
  };
}

interface Proc {
  child: Child;
  ready: boolean;
  fenced: boolean;
  last: { delivered: number; duplicates: number };
}

async function run(ctx: ScenarioContext, backend: Backend): Promise<ScenarioBody> {
  const rounds = ctx.size === 'full' ? 6 : 2;
  const r = ctx.random;
  const setup = await openSetup(backend, ctx.dir);
  const runner = new ScriptRunner(ctx.dir);
  const config: ConsumerChildConfig = {
    store: setup.storeConfig,
    target: setup.targetConfig,
    consumer: CONSUMER,
    filter: FILTER,
    batchSize: 50,
    leaseTtlMs: LEASE_TTL_MS,
    standby: true,
    until: 'signal',
  };
  const procs: Proc[] = [];
  const spawnConsumer = (): Proc => {
    const p: Proc = {
      child: new Child([...runner.command('consumer'), JSON.stringify(config)]),
      ready: false,
      fenced: false,
      last: { delivered: 0, duplicates: 0 },
    };
    p.child.onLine((line) => {
      if (line.startsWith('ready')) p.ready = true;
      else if (line.startsWith('state ') && line.includes('fenced')) p.fenced = true;
      else if (line.startsWith('m ')) {
        const [d, dup] = line.slice(2).split(' ').map(Number);
        p.last = { delivered: d ?? 0, duplicates: dup ?? 0 };
      }
    });
    procs.push(p);
    return p;
  };
  const body = emptyBody();
  let appending = true;
  let appended = 0;
  let fencedOwners = 0;
  let refrozen = 0;
  try {
    const appendLoop = (async () => {
      const ar = r.fork('appends');
      while (appending) {
        const n = ar.int(1, 4);
        await setup.store.append(
          `ledger-${ar.int(1, 20)}`,
          Array.from({ length: n }, (_, i) => ({ type: 'ledger.posted', data: { i } })),
        );
        appended += n;
        await delay(ar.int(0, 5));
      }
    })();
    let owner = spawnConsumer();
    await until(() => owner.ready || !owner.child.running, 120_000, 'the first owner');
    let standby = spawnConsumer();
    for (let round = 0; round < rounds; round++) {
      await delay(r.int(200, 800));
      owner.child.signal('SIGSTOP');
      ctx.log(`round ${round + 1}: SIGSTOP pid ${owner.child.pid}`);
      // Frozen inside a write transaction of the SQLite store or target, the owner would lock every
      // other process out of that file: resume it and freeze it again at another moment.
      const files = [setup.storeConfig, setup.targetConfig].flatMap((c) =>
        c.kind === 'sqlite' ? [c.path] : [],
      );
      for (let tries = 1; files.some(writeLocked); tries++) {
        if (tries > 20) throw new Error('the frozen owner held a SQLite write lock 20 times in a row');
        owner.child.signal('SIGCONT');
        refrozen++;
        await delay(r.int(5, 50));
        owner.child.signal('SIGSTOP');
        ctx.log(`round ${round + 1}: frozen inside a write transaction; SIGCONT, then SIGSTOP again`);
      }
      await until(() => standby.ready || !standby.child.running, 120_000, 'the standby to take over');
      if (!standby.child.running) throw new Error(`the standby exited: ${standby.child.stderr.slice(-1000)}`);
      // Keep the old owner frozen a little longer while the new one works, then let it run on.
      await delay(r.int(LEASE_TTL_MS, LEASE_TTL_MS * 2));
      owner.child.signal('SIGCONT');
      const old = owner;
      await until(() => old.fenced || !old.child.running, 60_000, 'the resumed owner to be fenced');
      if (old.fenced) fencedOwners++;
      await old.child.kill();
      owner = standby;
      standby = spawnConsumer();
    }
    appending = false;
    await appendLoop;
    const head = await setup.store.headPosition();
    await until(
      async () => (await setup.store.consumers.get(CONSUMER)).position >= head,
      120_000,
      'the owner to catch up',
    );
    for (const p of procs) p.child.signal('SIGTERM');
    await Promise.all(procs.map((p) => p.child.exited));
    const c = await setup.count(CONSUMER, FILTER);
    body.events = appended;
    body.lost = c.lost;
    body.doubled = c.doubled;
    body.outOfOrder = c.outOfOrder;
    body.delivered = procs.reduce((n, p) => n + p.last.delivered, 0);
    body.duplicates = procs.reduce((n, p) => n + p.last.duplicates, 0);
    body.faultCount = rounds;
    body.faults = `${rounds} SIGSTOP > lease, ${fencedOwners} fenced on SIGCONT`;
    body.notes.push(`final epoch ${(await setup.store.consumers.get(CONSUMER)).epoch}`);
    if (refrozen > 0)
      body.notes.push(`${refrozen} freezes inside a SQLite write transaction, resumed and frozen again`);
    if (fencedOwners !== rounds)
      body.error = `only ${fencedOwners} of ${rounds} resumed owners reported fenced`;
    return body;
  } finally {
    appending = false;
    for (const p of procs) await p.child.kill();
    await setup.close();
  }
}
