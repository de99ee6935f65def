import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { resolve } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { tempDir } from '../support/tempDir.js';
import { until } from '../support/until.js';

const CHILD = resolve('test/consumer/support/groupChild.ts');
const PARTITIONS = 8;
const STREAMS = 60;
const ROUNDS = 25;

/** Starts a member process; resolves once it has joined. */
function startMember(storePath: string, targetPath: string): Promise<ChildProcess> {
  return new Promise((done, fail) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', CHILD, storePath, targetPath, String(PARTITIONS)],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    // The member's error output, kept to name the cause when it exits with an error.
    let errors = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      errors = (errors + chunk).slice(-4000);
      process.stderr.write(chunk);
    });
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line === 'ready') done(child);
    });
    child.on('error', fail);
    child.on('exit', (code, signal) => {
      if (signal === null && code !== 0) fail(new Error(`member exited with ${code}: ${errors}`));
    });
  });
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((done) => {
    if (child.exitCode !== null || child.signalCode !== null) done();
    else child.once('exit', () => done());
  });
}

describe('consumer group members in separate processes (SQLite store and target)', () => {
  it('three members, one SIGKILLed and restarted again and again: every event once, each entity in order, every member worked', async () => {
    const dir = tempDir();
    const storePath = dir.file('events.db');
    const targetPath = dir.file('target.db');
    const store = await openSqliteStore({ path: storePath, durability: 'normal' });
    const members: ChildProcess[] = [];
    try {
      for (let i = 0; i < 3; i++) members.push(await startMember(storePath, targetPath));
      let appended = 0;
      for (let round = 1; round <= ROUNDS; round++) {
        for (let s = 0; s < STREAMS; s++) {
          await store.append(`acct-${s}`, [{ type: 'moved', data: { round } }]);
          appended++;
        }
        if (round % 5 === 0) {
          // The member of this round dies without a word and a new process takes its place.
          const victim = members.shift()!;
          victim.kill('SIGKILL');
          await exited(victim);
          members.push(await startMember(storePath, targetPath));
        }
      }
      const head = await store.headPosition();
      await until(
        async () => {
          const info = await store.consumers.get('ledger_v1');
          return info.partitions?.every((p) => p.lag === 0) === true && info.partitions.length === PARTITIONS;
        },
        { timeoutMs: 60_000, intervalMs: 100, message: 'every partition caught up' },
      );
      const db = new Database(targetPath, { readonly: true });
      try {
        const rows = db.prepare('SELECT stream, version, member FROM handled ORDER BY seq').all() as {
          stream: string;
          version: number;
          member: string;
        }[];
        assert.equal(head, appended);
        assert.equal(rows.length, appended, 'each event handled once (a rolled back batch leaves no row)');
        const last = new Map<string, number>();
        for (const r of rows) {
          assert.equal(r.version, (last.get(r.stream) ?? 0) + 1, `${r.stream} in order`);
          last.set(r.stream, r.version);
        }
        const byMember = new Set(rows.map((r) => r.member));
        assert.ok(byMember.size >= 3, `events handled by ${byMember.size} member processes`);
      } finally {
        db.close();
      }
      const info = await store.consumers.get('ledger_v1');
      const owners = new Set(info.partitions!.map((p) => p.owner));
      assert.ok(owners.size >= 2, 'the live members share the partitions');
    } finally {
      for (const m of members) m.kill('SIGTERM');
      await Promise.all(members.map(exited));
      await store.close();
      await dir.cleanup();
    }
  });
});
