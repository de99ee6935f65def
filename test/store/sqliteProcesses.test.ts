/**
 * Real processes on one SQLite file: (a) SIGKILL of a child appending in a loop loses no acknowledged
 * append; (b) two processes appending at once both succeed, losing nothing; (c) two processes
 * opening a new file at once both migrate it safely. Each prints its counts.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { STORE_MIGRATIONS } from '../../src/sqlite/migrations.js';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import type { RecordedEvent } from '../../src/core/event.js';
import { tempDir } from '../support/tempDir.js';
import { until } from '../support/until.js';

const APPENDER = fileURLToPath(new URL('./fixtures/appender.ts', import.meta.url));

interface Ack {
  stream: string;
  ids: string[];
  version: number;
  firstPosition: number;
  tag: string;
  k: number;
}

/** A child running the appender, with its acknowledged appends parsed as they arrive. */
class Child {
  readonly acks: Ack[] = [];
  readonly lines: string[] = [];
  stderr = '';
  private tail = '';
  readonly exited: Promise<[number | null, NodeJS.Signals | null]>;
  readonly proc: ChildProcessWithoutNullStreams;

  constructor(args: string[]) {
    this.proc = spawn(process.execPath, ['--import', 'tsx', APPENDER, ...args], { stdio: 'pipe' });
    this.exited = once(this.proc, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    this.proc.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      const parts = (this.tail + chunk).split('\n');
      this.tail = parts.pop() ?? '';
      for (const line of parts) {
        this.lines.push(line);
        if (line.startsWith('{')) this.acks.push(JSON.parse(line) as Ack);
      }
    });
    this.proc.stderr.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
  }

  /** Kills it if still running and waits for its exit. */
  async stop(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
    await this.exited;
  }
}

async function readEverything(file: string): Promise<RecordedEvent[]> {
  const store = await openSqliteStore({ path: file });
  try {
    const out: RecordedEvent[] = [];
    for await (const e of store.readAll()) out.push(e);
    return out;
  } finally {
    await store.close();
  }
}

function integrity(file: string): string {
  const db = new Database(file, { readonly: true });
  try {
    return (db.pragma('integrity_check', { simple: true }) as string) ?? 'no answer';
  } finally {
    db.close();
  }
}

interface Counts {
  acknowledged: number;
  lost: number;
  doubled: number;
  outOfOrder: number;
  stored: number;
}

/** Checks the file against every acknowledged append: present, in place, once, in order. */
function check(events: RecordedEvent[], acks: readonly Ack[]): Counts {
  const byId = new Map(events.map((e) => [e.id, e]));
  let lost = 0;
  let acknowledged = 0;
  for (const a of acks) {
    a.ids.forEach((id, j) => {
      acknowledged++;
      const e = byId.get(id);
      const expectedVersion = a.version - a.ids.length + 1 + j;
      if (!e || e.stream !== a.stream || e.version !== expectedVersion || e.position !== a.firstPosition + j)
        lost++;
    });
  }
  const keys = events.map((e) => JSON.stringify(e.data));
  const doubled = keys.length - new Set(keys).size;
  let outOfOrder = 0;
  events.forEach((e, i) => {
    if (e.position !== i + 1) outOfOrder++;
  });
  const versions = new Map<string, number>();
  for (const e of events) {
    const v = (versions.get(e.stream) ?? 0) + 1;
    if (e.version !== v) outOfOrder++;
    versions.set(e.stream, e.version);
  }
  return { acknowledged, lost, doubled, outOfOrder, stored: events.length };
}

describe('SQLite store across processes', () => {
  it('SIGKILL of an appending process loses no acknowledged append (5 rounds on one file, durability full and normal)', async () => {
    const dir = tempDir();
    const file = dir.file('killed.db');
    const acks: Ack[] = [];
    try {
      for (let round = 1; round <= 5; round++) {
        // Odd rounds with the default durability (full), even rounds with normal: both survive a process kill.
        const durability = round % 2 === 1 ? 'full' : 'normal';
        const child = new Child([file, 'loop', `r${round}`, '0', durability]);
        try {
          const target = 20 + Math.floor(Math.random() * 300);
          await until(() => child.acks.length >= target || child.proc.exitCode !== null, {
            timeoutMs: 30_000,
            message: `${target} acknowledged appends from round ${round}`,
          });
          assert.equal(child.proc.exitCode, null, `the appender died early: ${child.stderr}`);
        } finally {
          await child.stop();
        }
        assert.equal(child.proc.signalCode, 'SIGKILL');
        acks.push(...child.acks);
        const events = await readEverything(file);
        const counts = check(events, acks);
        console.log(`# kill round ${round} (durability ${durability}): ${JSON.stringify(counts)}`);
        assert.equal(
          counts.lost,
          0,
          'every acknowledged event is present, in its stream, version and position',
        );
        assert.equal(counts.doubled, 0, 'no event stored twice');
        assert.equal(counts.outOfOrder, 0, 'positions and per-stream versions are contiguous');
        assert.ok(counts.stored >= counts.acknowledged);
        assert.equal(integrity(file), 'ok');
      }
    } finally {
      await dir.cleanup();
    }
  });

  it('two processes appending to the same file at once both succeed, losing nothing', async () => {
    const dir = tempDir();
    const file = dir.file('shared.db');
    // Create the file first, so that this test is about concurrent appends only.
    await (await openSqliteStore({ path: file })).close();
    const per = 400;
    const children = [
      new Child([file, 'count', 'left', String(per)]),
      new Child([file, 'count', 'right', String(per)]),
    ];
    try {
      const exits = await Promise.all(children.map((c) => c.exited));
      children.forEach((c, i) => assert.deepEqual(exits[i], [0, null], `child ${i} failed: ${c.stderr}`));
      for (const c of children) assert.equal(c.acks.length, per);
      const events = await readEverything(file);
      const counts = check(
        events,
        children.flatMap((c) => c.acks),
      );
      console.log(`# two writers: ${JSON.stringify(counts)}`);
      assert.equal(counts.lost, 0);
      assert.equal(counts.doubled, 0);
      assert.equal(counts.outOfOrder, 0);
      assert.equal(counts.stored, counts.acknowledged, 'nothing stored that was not acknowledged');
      const tags = new Set(events.map((e) => (e.data as { tag: string }).tag));
      assert.deepEqual([...tags].sort(), ['left', 'right']);
      assert.equal(integrity(file), 'ok');
    } finally {
      await Promise.all(children.map((c) => c.stop()));
      await dir.cleanup();
    }
  });

  it('several processes opening a new file at once all migrate it safely', async () => {
    for (let round = 1; round <= 2; round++) {
      const dir = tempDir();
      const file = dir.file('fresh.db');
      const children = [0, 1, 2].map((i) => new Child([file, 'open', `c${i}`]));
      try {
        await until(() => children.every((c) => c.lines.includes('ready') || c.proc.exitCode !== null), {
          timeoutMs: 30_000,
          message: 'every child ready',
        });
        for (const c of children) c.proc.stdin.end('go\n');
        const exits = await Promise.all(children.map((c) => c.exited));
        children.forEach((c, i) => assert.deepEqual(exits[i], [0, null], `child ${i} failed: ${c.stderr}`));
        const events = await readEverything(file);
        const counts = check(
          events,
          children.flatMap((c) => c.acks),
        );
        assert.deepEqual(counts, {
          acknowledged: children.flatMap((c) => c.acks).reduce((n, a) => n + a.ids.length, 0),
          lost: 0,
          doubled: 0,
          outOfOrder: 0,
          stored: counts.acknowledged,
        });
        const db = new Database(file, { readonly: true });
        try {
          const rows = db.prepare('SELECT version FROM idem_schema ORDER BY version').all() as {
            version: number;
          }[];
          const want = STORE_MIGRATIONS.map((m) => m.version).sort((a, b) => a - b);
          assert.deepEqual(
            rows.map((r) => r.version),
            want,
            'each store migration recorded exactly once',
          );
        } finally {
          db.close();
        }
        assert.equal(integrity(file), 'ok');
        console.log(
          `# concurrent open round ${round}: 3 processes, ${events.length} events, schema ${JSON.stringify(STORE_MIGRATIONS.map((m) => m.version))}`,
        );
      } finally {
        await Promise.all(children.map((c) => c.stop()));
        await dir.cleanup();
      }
    }
  });
});
