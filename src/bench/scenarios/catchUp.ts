import { fork } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeBulkLog } from '../bulkLog.js';
import type { CatchUpMode, CatchUpResult } from '../catchUpChild.js';
import { baselineRow, row } from '../measure.js';
import type { BenchRow, Scenario } from '../types.js';

const NAME = 'catch-up';
/** The partitions of the group row's consumer. */
const GROUP_PARTITIONS = 8;

/**
 * Which file the reading child runs. Users run idem compiled (the package's entry points are in
 * dist/), so the child runs compiled JavaScript: its sibling .js when the bench itself runs from
 * dist/, and dist/bench/catchUpChild.js when the bench runs from source through tsx and dist/ is up
 * to date (newer than every file in src/). Otherwise it runs from source through tsx, which adds
 * about 30 MB of RSS for the loader and its compiled sources; the row's shape says which.
 */
export function catchUpChildEntry(): { url: URL; execArgv: string[]; fromSource: boolean } {
  if (!import.meta.url.endsWith('.ts')) {
    return { url: new URL('../catchUpChild.js', import.meta.url), execArgv: [], fromSource: false };
  }
  const root = new URL('../../../', import.meta.url);
  const built = new URL('dist/bench/catchUpChild.js', root);
  if (existsSync(built) && statSync(built).mtimeMs >= newestMtime(fileURLToPath(new URL('src/', root)))) {
    return { url: built, execArgv: [], fromSource: false };
  }
  return {
    url: new URL('../catchUpChild.ts', import.meta.url),
    execArgv: process.execArgv,
    fromSource: true,
  };
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/** Runs the reader in its own process, so the RSS figures are the reader's alone. */
function readInChild(
  mode: CatchUpMode,
  path: string,
  expected: number,
  timeoutMs: number,
  partitions = 0,
): Promise<CatchUpResult> {
  const entry = catchUpChildEntry();
  // --expose-gc only makes gc() callable (the child measures the heap it retains); GC settings stay V8's defaults.
  const child = fork(entry.url, [mode, path, String(expected), String(partitions)], {
    execArgv: [...entry.execArgv, '--expose-gc'],
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  // A reader that stops making progress must not hang the bench.
  const timer = setTimeout(() => {
    stderr += `\nkilled after ${timeoutMs} ms`;
    child.kill('SIGKILL');
  }, timeoutMs);
  return new Promise((resolve, reject) => {
    let answer: { ok: true; result: CatchUpResult } | { ok: false; error: string } | null = null;
    child.on('message', (m) => (answer = m as typeof answer));
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      const a = answer;
      if (a?.ok) resolve(a.result);
      else reject(new Error(`catch-up reader (${mode}) failed, exit ${code}: ${a ? a.error : stderr}`));
    });
  });
}

function extra(r: CatchUpResult): Record<string, number> {
  return {
    startRssMb: r.startRssMb,
    tenthRssMb: r.tenthRssMb,
    peakRssMb: r.peakRssMb,
    startHeapMb: r.startHeapMb,
    tenthHeapMb: r.tenthHeapMb,
    endHeapMb: r.endHeapMb,
  };
}

/**
 * Scenario 6: a new consumer reads the whole log from position 0; rate and the reader's peak RSS. Then
 * the same consumer as a group of GROUP_PARTITIONS partitions in one member process: each partition
 * reads only its own events, so the group reads each event once in all and takes about the consumer's
 * time (one process: the comparison is of reading, not of processes; an SQLite target has one writer).
 */
export const catchUp: Scenario = {
  name: NAME,
  description: 'a consumer catching up from position 0: events/s and peak RSS of the reading process',
  needs: [],
  async run(ctx) {
    const n = ctx.size(20_000, 1_000_000, 1_000);
    const timeoutMs = ctx.quick ? 60_000 : 300_000;
    const dir = await ctx.tempDir();
    const path = join(dir, 'log.db');
    const entry = catchUpChildEntry();
    const runtime = entry.fromSource ? 'reader run from source through tsx' : 'reader run from dist/';
    if (entry.fromSource)
      ctx.log(
        `${NAME}: dist/ is missing or older than src/, so the reader runs through tsx (npm run build first for the figures users get)`,
      );
    ctx.log(`${NAME}: populating the log with ${n} events`);
    await writeBulkLog(path, n);
    const out: BenchRow[] = [];
    ctx.log(`${NAME}: baseline raw iterate`);
    const raw = await readInChild('raw', path, n, timeoutMs);
    const rawRow = baselineRow(
      NAME,
      `raw better-sqlite3 iterate + JSON.parse; ${runtime}`,
      { ...raw, eventsPerSec: raw.events / raw.seconds },
      extra(raw),
    );
    out.push(rawRow);
    ctx.log(`${NAME}: createConsumer from 0`);
    const r = await readInChild('consumer', path, n, timeoutMs);
    if (r.events < n) throw new Error(`the consumer handled ${r.events} of ${n} events`);
    out.push(
      row({
        scenario: NAME,
        shape: `createConsumer from 0 (no-op handler, entity-version, SQLite target); ${runtime}`,
        measured: { events: r.events, seconds: r.seconds, eventsPerSec: r.events / r.seconds },
        against: rawRow,
        target: { text: 'peak RSS < 200 MB', met: r.peakRssMb < 200 },
        extra: extra(r),
      }),
    );
    ctx.log(`${NAME}: createConsumer with ${GROUP_PARTITIONS} partitions from 0, one member`);
    const g = await readInChild('group', path, n, timeoutMs, GROUP_PARTITIONS);
    const consumerRow = out[out.length - 1]!;
    out.push(
      row({
        scenario: NAME,
        shape: `createConsumer with ${GROUP_PARTITIONS} partitions from 0, one member holding all (same handler, guard and target), vs the consumer above; ${runtime}`,
        measured: { events: g.events, seconds: g.seconds, eventsPerSec: g.events / g.seconds },
        against: consumerRow,
        target: {
          text: 'each event read once; time <= 1.3x the consumer',
          met: g.read === n && g.seconds <= 1.3 * r.seconds,
        },
        extra: { read: g.read, consumerRead: r.read, ...extra(g) },
      }),
    );
    return out;
  },
};
