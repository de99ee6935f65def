// Ownership across real processes sharing one SQLite file: a second subscriber is
// refused; an owner paused (SIGSTOP) past its lease loses it to a standby and, resumed (SIGCONT), is
// fenced: its acks and parks change nothing.
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { randomConsumer, randomStream } from '../support/names.js';
import { tempDir } from '../support/tempDir.js';
import { until } from '../support/until.js';
import { appendN, nextEvents, rejectsWith } from './suite/context.js';

const OWNER = fileURLToPath(new URL('./fixtures/owner.ts', import.meta.url));

class Child {
  readonly lines: Record<string, unknown>[] = [];
  readonly proc: ChildProcessWithoutNullStreams;
  stderr = '';

  constructor(path: string, consumer: string, ttlMs: number) {
    this.proc = spawn(process.execPath, ['--import', 'tsx', OWNER, path, consumer, String(ttlMs)], {
      stdio: 'pipe',
    });
    let buf = '';
    this.proc.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        this.lines.push(JSON.parse(buf.slice(0, i)) as Record<string, unknown>);
        buf = buf.slice(i + 1);
      }
    });
    this.proc.stderr.on('data', (d: Buffer) => (this.stderr += d.toString()));
  }

  async line(key: string, timeoutMs = 20_000): Promise<Record<string, unknown>> {
    return until(() => this.lines.find((l) => key in l), {
      timeoutMs,
      message: `child line "${key}" (stderr: ${this.stderr})`,
    });
  }

  send(cmd: string): void {
    this.proc.stdin.write(`${cmd}\n`);
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise((resolve) => this.proc.once('exit', resolve));
    this.proc.kill('SIGCONT');
    this.proc.kill('SIGKILL');
    await exited;
  }
}

describe('subscriptions across processes (SQLite file)', () => {
  it('refuses a second process with consumer_busy while the first owns the consumer', async () => {
    const dir = tempDir();
    const path = dir.file('events.db');
    const store = await openSqliteStore({ path });
    const name = randomConsumer();
    const sub = await store.subscribe(name, { owner: 'parent' });
    const child = new Child(path, name, 1000);
    try {
      const answer = await child.line('subscribed');
      assert.deepEqual(answer, { subscribed: false, code: 'consumer_busy' });
    } finally {
      await child.stop();
      await sub.close();
      await store.close();
      await dir.cleanup();
    }
  });

  it('takes over from an owner paused past its lease, and fences the owner once resumed', async () => {
    const dir = tempDir();
    const path = dir.file('events.db');
    const store = await openSqliteStore({ path });
    const name = randomConsumer();
    await appendN(store, randomStream(), 5);
    const child = new Child(path, name, 1000);
    try {
      const first = await child.line('subscribed');
      assert.equal(first.subscribed, true);
      await child.line('delivered');
      child.send('ack 2');
      assert.equal((await child.line('ack')).ack, 'ok');
      assert.equal((await store.consumers.get(name)).position, 2);
      await rejectsWith(() => store.subscribe(name), 'consumer_busy');

      child.proc.kill('SIGSTOP');
      // The standby waits for the paused owner's lease to run out, then takes over.
      const standby = await store.subscribe(name, { standby: true, owner: 'parent', leaseTtlMs: 5000 });
      try {
        assert.equal(standby.epoch, (first.epoch as number) + 1);
        assert.equal(standby.startPosition, 2);
        child.proc.kill('SIGCONT');
        child.send('ack 5');
        child.send('park 3');
        assert.equal((await child.line('park')).park, 'fenced');
        assert.deepEqual(
          child.lines.filter((l) => 'ack' in l).map((l) => l.ack),
          ['ok', 'fenced'],
        );
        assert.equal((await child.line('ended')).ended, 'fenced');
        const info = await store.consumers.get(name);
        assert.equal(info.position, 2, "the stale owner's ack did not move the cursor");
        assert.equal(info.epoch, standby.epoch);
        assert.equal(info.owner, 'parent');
        assert.deepEqual(await store.deadLetters.list(name), [], "the stale owner's park was not recorded");
        // The new owner gets everything after the cursor.
        assert.deepEqual(
          (await nextEvents(standby[Symbol.asyncIterator]())).events.map((e) => e.position),
          [3, 4, 5],
        );
      } finally {
        await standby.close();
      }
    } finally {
      await child.stop();
      await store.close();
      await dir.cleanup();
    }
  });
});
