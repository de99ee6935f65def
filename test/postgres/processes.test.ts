import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isIdemError } from '../../src/core/errors.js';
import type { Subscription } from '../../src/core/subscription.js';
import { openPostgresStore } from '../../src/postgres/index.js';
import { STORE_MIGRATIONS } from '../../src/postgres/postgresStore.js';
import { randomConsumer, randomIdentifier } from '../support/names.js';
import { until } from '../support/until.js';
import { pgTestContext } from './pgFixtures.js';

const ctx = await pgTestContext();
const CHILD = fileURLToPath(new URL('./fixtures/pgChild.ts', import.meta.url));

/** A child process speaking JSON lines. */
class Child {
  readonly proc: ChildProcessWithoutNullStreams;
  readonly lines: Record<string, unknown>[] = [];
  stderr = '';

  constructor(args: string[]) {
    this.proc = spawn(process.execPath, ['--import', 'tsx', CHILD, ...args], { stdio: 'pipe' });
    createInterface({ input: this.proc.stdout }).on('line', (l) =>
      this.lines.push(JSON.parse(l) as Record<string, unknown>),
    );
    this.proc.stderr.on('data', (d: Buffer) => (this.stderr += d.toString()));
  }

  /** The first line having `key`, waiting for it. */
  line(key: string, timeoutMs = 20_000): Promise<Record<string, unknown>> {
    return until(() => this.lines.find((l) => key in l), {
      timeoutMs,
      message: `a "${key}" line from the child (stderr: ${this.stderr.slice(-500)})`,
    });
  }

  send(text: string): void {
    this.proc.stdin.write(`${text}\n`);
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise((resolve) => this.proc.once('exit', resolve));
    this.proc.kill(signal);
    await exited;
  }
}

describe('postgres store shared by several processes', { skip: ctx.skip }, () => {
  it('four processes migrating one new schema at once: all open it, each migration runs once', async () => {
    const schema = randomIdentifier('mig');
    const children = Array.from({ length: 4 }, () => new Child(['migrate', ctx.db.connectionString, schema]));
    try {
      await Promise.all(children.map((c) => c.line('ready')));
      for (const c of children) c.send('go');
      const results = await Promise.all(children.map((c) => c.line('opened', 30_000)));
      const store = await openPostgresStore({ connectionString: ctx.db.connectionString, schema });
      try {
        const rows = await store.pool.query<{ version: number }>(
          `SELECT version FROM "${schema}".schema_migrations ORDER BY version`,
        );
        const versions = rows.rows.map((r) => r.version);
        console.log(`# migrated by 4 processes at once: versions ${versions.join(',')}`);
        const all = STORE_MIGRATIONS.map((m) => m.version).sort((a, b) => a - b);
        assert.deepEqual(versions, all);
        for (const r of results) assert.equal(r.version, all[all.length - 1]);
        const a = await store.append('mig-1', [{ type: 't', data: null }]);
        assert.equal(a.firstPosition, 1);
      } finally {
        await store.close();
      }
    } finally {
      await Promise.all(children.map((c) => c.kill()));
    }
  });

  it("lease and fencing across processes: busy while owned, takeover after a pause, the paused owner's acks and parks are fenced", async () => {
    const store = await ctx.openStore();
    const name = randomConsumer('owner');
    const child = new Child(['hold', ctx.db.connectionString, store.schema, name, '1000']);
    let sub: Subscription | undefined;
    try {
      for (let i = 0; i < 3; i++) await store.append('proc-a', [{ type: 't', data: { i } }]);
      const held = await child.line('epoch');
      assert.equal(held.epoch, 1);
      assert.equal(held.delivered, 3);
      await assert.rejects(store.subscribe(name), (err: unknown) => isIdemError(err, 'consumer_busy'));
      // Freeze the owner: it stops renewing; once its lease runs out a standby takes over.
      child.proc.kill('SIGSTOP');
      sub = await store.subscribe(name, { standby: true, leaseTtlMs: 5000 });
      assert.equal(sub.epoch, 2);
      const it = sub[Symbol.asyncIterator]();
      const first = await it.next();
      assert.ok(!first.done && first.value.kind === 'events');
      assert.deepEqual(
        first.value.events.map((e) => e.position),
        [1, 2, 3],
        'nothing was acknowledged by the frozen owner',
      );
      await sub.ack(3);
      // Wake the old owner: its acknowledgement is refused.
      child.proc.kill('SIGCONT');
      child.send('ack');
      const ack = await child.line('ack');
      assert.equal(ack.ack, 'fenced');
      child.send('park');
      assert.equal((await child.line('park')).park, 'fenced');
      assert.deepEqual(await store.deadLetters.list(name), [], "the fenced owner's park changed nothing");
      const info = await store.consumers.get(name);
      assert.equal(info.epoch, 2);
      assert.equal(info.position, 3);
    } finally {
      child.proc.kill('SIGCONT');
      await child.kill();
      await sub?.close();
      await store.close();
    }
  });

  it('an owner killed with SIGKILL: a standby in another process takes over and resumes at the cursor', async () => {
    const store = await ctx.openStore();
    const name = randomConsumer('crash');
    const child = new Child(['hold', ctx.db.connectionString, store.schema, name, '1000']);
    let sub: Subscription | undefined;
    try {
      for (let i = 0; i < 4; i++) await store.append(`crash-${i % 2}`, [{ type: 't', data: { i } }]);
      await child.line('epoch');
      child.send('ack');
      assert.equal((await child.line('ack')).ack, 'ok');
      await child.kill('SIGKILL');
      for (let i = 4; i < 6; i++) await store.append(`crash-${i % 2}`, [{ type: 't', data: { i } }]);
      sub = await store.subscribe(name, { standby: true });
      assert.equal(sub.epoch, 2);
      assert.equal(sub.startPosition, 4);
      const seen: number[] = [];
      for await (const m of sub) {
        if (m.kind === 'events') seen.push(...m.events.map((e) => e.position));
        if (m.kind === 'caught_up') break;
      }
      assert.deepEqual(seen, [5, 6]);
    } finally {
      await child.kill();
      await sub?.close();
      await store.close();
    }
  });
});
