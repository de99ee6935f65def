import { fork } from 'node:child_process';
import { join } from 'node:path';
import { writeBulkLog } from '../bulkLog.js';
import type { CatchUpMode, CatchUpResult } from '../catchUpChild.js';
import { baselineRow, row } from '../measure.js';
import type { BenchRow, Scenario } from '../types.js';

const NAME = 'catch-up';

/** Runs the reader in its own process, so the RSS figures are the reader's alone. */
function readInChild(
  mode: CatchUpMode,
  path: string,
  expected: number,
  timeoutMs: number,
): Promise<CatchUpResult> {
  // The child is a sibling module; under tsx it is the .ts source, when built the .js file.
  const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
  const child = fork(new URL(`../catchUpChild.${ext}`, import.meta.url), [mode, path, String(expected)], {
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
  return { startRssMb: r.startRssMb, tenthRssMb: r.tenthRssMb, peakRssMb: r.peakRssMb };
}

/** Scenario 6: a new consumer reads the whole log from position 0; rate and the reader's peak RSS. */
export const catchUp: Scenario = {
  name: NAME,
  description: 'a consumer catching up from position 0: events/s and peak RSS of the reading process',
  needs: [],
  async run(ctx) {
    const n = ctx.size(20_000, 1_000_000, 1_000);
    const timeoutMs = ctx.quick ? 60_000 : 300_000;
    const dir = await ctx.tempDir();
    const path = join(dir, 'log.db');
    ctx.log(`${NAME}: populating the log with ${n} events`);
    await writeBulkLog(path, n);
    const out: BenchRow[] = [];
    ctx.log(`${NAME}: baseline raw iterate`);
    const raw = await readInChild('raw', path, n, timeoutMs);
    const rawRow = baselineRow(
      NAME,
      'raw better-sqlite3 iterate + JSON.parse',
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
        shape: 'createConsumer from 0 (no-op handler, entity-version, SQLite target)',
        measured: { events: r.events, seconds: r.seconds, eventsPerSec: r.events / r.seconds },
        against: rawRow,
        target: { text: 'peak RSS < 200 MB', met: r.peakRssMb < 200 },
        extra: extra(r),
      }),
    );
    return out;
  },
};
