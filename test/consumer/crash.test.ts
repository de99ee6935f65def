import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, symlinkSync } from 'node:fs';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { LEDGER_OF_CONSUMER } from '../../src/sqlite/ledgerSql.js';
import { tempDir } from '../support/tempDir.js';

const CHILD = fileURLToPath(new URL('./support/crashChild.ts', import.meta.url));

/**
 * The child runs 20+ times, so its start-up time matters: bundle it once with esbuild (which tsx
 * brings) into plain JavaScript next to a `node_modules` link; fall back to tsx when that fails.
 */
function childCommand(dir: string): string[] {
  const esbuild = resolve('node_modules/.bin/esbuild');
  const out = resolve(dir, 'crashChild.mjs');
  if (existsSync(esbuild)) {
    const r = spawnSync(esbuild, [
      CHILD,
      '--bundle',
      '--platform=node',
      '--format=esm',
      '--target=node20',
      '--packages=external',
      `--outfile=${out}`,
      '--log-level=warning',
    ]);
    if (r.status === 0) {
      symlinkSync(resolve('node_modules'), resolve(dir, 'node_modules'), 'dir');
      return [out];
    }
  }
  return ['--import', 'tsx', CHILD];
}

interface Life {
  killed: boolean;
  done: boolean;
  last: { delivered: number; duplicates: number; processed: number };
}

/**
 * Runs the child once. Unless `shouldKill` is null, polls it every 2 ms and SIGKILLs the child as soon
 * as it says so (it watches the child's progress in the databases): the kill lands wherever the child
 * is by then (mid-batch, between the commit and the ack, ...), on a fast or a loaded machine alike.
 */
function runChild(command: string[], args: string[], shouldKill: (() => boolean) | null): Promise<Life> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...command, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const life: Life = { killed: false, done: false, last: { delivered: 0, duplicates: 0, processed: 0 } };
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const poll = shouldKill
      ? setInterval(() => {
          if (!life.killed && shouldKill()) life.killed = child.kill('SIGKILL');
        }, 2)
      : undefined;
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line === 'done') life.done = true;
      else if (line.startsWith('m ')) {
        const [delivered, duplicates, processed] = line.slice(2).split(' ').map(Number);
        life.last = { delivered: delivered!, duplicates: duplicates!, processed: processed! };
      }
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearInterval(poll);
      if (signal === 'SIGKILL' || code === 0 || code === 75) resolve(life);
      else reject(new Error(`child exited with ${code ?? signal}: ${stderr}`));
    });
  });
}

interface Outcome {
  kills: number;
  delivered: number;
  duplicates: number;
  lost: number;
  doubled: number;
  totalsMatch: boolean;
  ledgerRows: number;
}

/** `maxPerLife`: a life is killed once a random 1..maxPerLife more events are committed (or blindly written), until `minKills` kills. */
async function crashRun(
  mode: 'ledger' | 'blind' | 'retain',
  events: number,
  minKills: number,
  maxPerLife: number,
): Promise<Outcome> {
  const dir = tempDir('idem-crash-');
  try {
    const storePath = dir.file('store.db');
    const targetPath = dir.file('target.db');
    const blindPath = dir.file('blind.db');
    const store = await openSqliteStore({ path: storePath, durability: 'normal' });
    const expected = new Map<string, { total: number; events: number }>();
    const streams = 200;
    const perStream = events / streams;
    try {
      for (let s = 0; s < streams; s++) {
        const stream = `invoice-${s}`;
        const batch = Array.from({ length: perStream }, (_, i) => ({
          type: 'invoice.line_added',
          data: { amount: 1 + ((s * 7 + i) % 13) },
        }));
        await store.append(stream, batch);
        expected.set(stream, { total: batch.reduce((x, e) => x + e.data.amount, 0), events: perStream });
      }
    } finally {
      await store.close();
    }
    const args =
      mode === 'blind' ? [storePath, targetPath, 'blind', blindPath] : [storePath, targetPath, mode];
    const command = childCommand(dir.path);
    let kills = 0;
    let delivered = 0;
    let duplicates = 0;
    // Progress as the parent sees it: the target's checkpoint (ledger run) or the blind counter's
    // committed rows (blind run), read through their own read-only connections.
    const progress = (): number => {
      try {
        const db = new Database(mode !== 'blind' ? targetPath : blindPath, {
          readonly: true,
          fileMustExist: true,
        });
        try {
          return mode !== 'blind'
            ? ((
                db.prepare(`SELECT position FROM idem_checkpoints WHERE consumer = 'billing_v2'`).get() as
                  { position: number } | undefined
              )?.position ?? 0)
            : ((db.prepare('SELECT sum(events) AS n FROM invoice_status').get() as { n: number | null }).n ??
                0);
        } finally {
          db.close();
        }
      } catch {
        return 0; // not created yet
      }
    };
    for (let life = 0; life < 500; life++) {
      let shouldKill: (() => boolean) | null = null;
      if (kills < minKills) {
        const at = progress() + 1 + Math.floor(Math.random() * maxPerLife);
        shouldKill = () => progress() >= at;
      }
      const l = await runChild(command, args, shouldKill);
      if (l.killed && !l.done) kills++;
      delivered += l.last.delivered;
      duplicates += l.last.duplicates;
      if (l.done) break;
    }
    const out = new Database(mode !== 'blind' ? targetPath : blindPath, { readonly: true });
    const target = new Database(targetPath, { readonly: true });
    try {
      const rows = out.prepare('SELECT stream, total, events FROM invoice_status').all() as {
        stream: string;
        total: number;
        events: number;
      }[];
      const got = new Map(rows.map((r) => [r.stream, r]));
      let lost = 0;
      let doubled = 0;
      let totalsMatch = true;
      for (const [stream, want] of expected) {
        const have = got.get(stream) ?? { total: 0, events: 0 };
        lost += Math.max(0, want.events - have.events);
        doubled += Math.max(0, have.events - want.events);
        if (have.total !== want.total) totalsMatch = false;
      }
      const ledgerRows = (
        target.prepare(`SELECT count(DISTINCT key) AS n ${LEDGER_OF_CONSUMER}`).get('billing_v2') as {
          n: number;
        }
      ).n;
      return { kills, delivered, duplicates, lost, doubled, totalsMatch, ledgerRows };
    } finally {
      out.close();
      target.close();
    }
  } finally {
    await dir.cleanup();
  }
}

describe('consumer crash test (SIGKILL at random moments, SQLite store + SQLite target)', () => {
  it('with the ledger in the output transaction: exactly-once totals, one ledger row per event', async () => {
    const r = await crashRun('ledger', 20_000, 20, 800);
    console.log(
      `# ledger: delivered=${r.delivered} (reported) duplicates=${r.duplicates} kills=${r.kills} lost=${r.lost} doubled=${r.doubled} ledger_rows=${r.ledgerRows}`,
    );
    assert.ok(r.kills >= 20, `killed ${r.kills} times`);
    assert.equal(r.lost, 0);
    assert.equal(r.doubled, 0);
    assert.ok(r.totalsMatch, 'every invoice total equals the exactly-once total');
    assert.equal(r.ledgerRows, 20_000);
  });

  it("with ledger: { retain: 'checkpoint' }: kills after prunes double nothing, and the ledger stays pruned", async () => {
    // Lives of up to 6,000 events: the runtime prunes every 5,000, so some kills land right after a prune.
    const r = await crashRun('retain', 60_000, 8, 6000);
    console.log(
      `# retain: delivered=${r.delivered} (reported) duplicates=${r.duplicates} kills=${r.kills} lost=${r.lost} doubled=${r.doubled} ledger_rows=${r.ledgerRows}`,
    );
    assert.ok(r.kills >= 8, `killed ${r.kills} times`);
    assert.equal(r.lost, 0);
    assert.equal(r.doubled, 0);
    assert.ok(r.totalsMatch, 'every invoice total equals the exactly-once total');
    assert.ok(r.ledgerRows < 60_000, `ledger pruned: ${r.ledgerRows} rows`);
  });

  it('with a blind counter outside the ledger transaction: the same kills double events (the test can fail)', async () => {
    const r = await crashRun('blind', 4_000, 5, 300);
    console.log(
      `# blind: delivered=${r.delivered} (reported) duplicates=${r.duplicates} kills=${r.kills} lost=${r.lost} doubled=${r.doubled}`,
    );
    assert.ok(r.kills >= 5);
    assert.equal(r.lost, 0);
    assert.ok(r.doubled > 0, 'a kill between the blind write and the commit repeats the write');
    assert.ok(!r.totalsMatch);
  });
});
