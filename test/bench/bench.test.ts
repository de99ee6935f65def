import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { benchScenarioNames, type BenchReport } from '../../src/bench/index.js';
import { idem, startIdem } from '../cli/cli.js';
import { until } from '../support/until.js';

/** Runs `npm run bench`'s script as CI does, at a tiny scale, and returns its parsed JSON report. */
function runQuickBench(tmp: string): Promise<{ code: number | null; report: BenchReport; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'bench/run.ts', '--quick', '--scale', '0.05', '--json'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, TMPDIR: tmp },
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      try {
        resolve({ code, report: JSON.parse(stdout) as BenchReport, stderr });
      } catch (err) {
        reject(new Error(`bench printed no JSON (exit ${code}): ${stderr}\n${stdout}`, { cause: err }));
      }
    });
  });
}

describe('npm run bench', () => {
  it('idem bench --help names every scenario', async () => {
    const r = await idem(['bench', '--help']);
    assert.equal(r.code, 0, r.stderr);
    const help = r.stdout.replace(/\s+/g, ' ');
    for (const name of benchScenarioNames())
      assert.match(help, new RegExp(`\\b${name}\\b`), `help names ${name}`);
  });

  it(
    'runs every scenario in --quick mode and reports numeric figures for each',
    { timeout: 120_000 },
    async () => {
      const tmp = mkdtempSync(join(tmpdir(), 'idem-bench-test-'));
      try {
        const { code, report, stderr } = await runQuickBench(tmp);
        assert.deepEqual(report.failed, [], stderr);
        assert.equal(code, 0, stderr);
        assert.equal(report.mode, 'quick');
        assert.deepEqual(report.scenarios, benchScenarioNames());
        // (tsx keeps its compile cache in TMPDIR too; only the bench's own directories count.)
        const left = readdirSync(tmp).filter((name) => name.startsWith('idem-bench-'));
        assert.deepEqual(left, [], 'the bench left temporary files behind');
        checkFigures(report);
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    },
  );
});

describe('idem bench interrupted', () => {
  it('SIGINT in the middle of a scenario removes its files and exits 130', { timeout: 120_000 }, async () => {
    const tmp = mkdtempSync(join(tmpdir(), 'idem-bench-sig-'));
    try {
      // The full sqlite-append scenario runs for tens of seconds: the signal lands inside it.
      const bench = await startIdem(['bench', '--only', 'sqlite-append'], { env: { TMPDIR: tmp } });
      // After the warm-up, the timed 1,000 sequential durable appends (seconds long): each shape
      // makes its directory when it starts and removes it when it ends, so wait for the directory
      // itself rather than read it once when the line shows (it may not exist yet: CI saw that).
      await bench.waitFor(/round 1\/3: single \(/, 'stderr', 90_000);
      const during = await until(
        () => {
          const dirs = readdirSync(tmp).filter((name) => name.startsWith('idem-bench-'));
          return dirs.length > 0 ? dirs : null;
        },
        { timeoutMs: 30_000, message: 'the scenario to make its temporary directory' },
      );
      const r = await bench.stop('SIGINT');
      assert.equal(r.code, 130, r.stderr);
      assert.match(r.stderr, /SIGINT: cleaning up/);
      assert.ok(during.length > 0);
      const left = readdirSync(tmp).filter((name) => name.startsWith('idem-bench-'));
      assert.deepEqual(left, [], 'the bench left temporary files behind');
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});

function checkFigures(report: BenchReport): void {
  for (const name of report.scenarios) {
    const rows = report.rows.filter((r) => r.scenario === name);
    const skipped = report.skipped.find((s) => s.scenario === name);
    if (skipped) {
      assert.equal(rows.length, 0, `${name} is both skipped and measured`);
      assert.match(skipped.reason, /\S/);
      // A PostgreSQL scenario may only be skipped when PostgreSQL is down and not required.
      if (process.env.IDEM_REQUIRE_SERVICES === '1') assert.fail(`${name} skipped: ${skipped.reason}`);
      continue;
    }
    assert.ok(
      rows.some((r) => !r.baseline),
      `${name} has no idem measurement`,
    );
    assert.ok(
      rows.some((r) => r.baseline),
      `${name} has no baseline measured in the same run`,
    );
    for (const r of rows) {
      for (const field of ['events', 'seconds', 'eventsPerSec'] as const) {
        assert.ok(Number.isFinite(r[field]) && r[field] > 0, `${name} / ${r.shape}: ${field} = ${r[field]}`);
      }
      if (r.baselineEventsPerSec !== null) assert.ok(Number.isFinite(r.ratio), `${name} / ${r.shape}: ratio`);
      for (const [k, v] of Object.entries(r.extra))
        assert.ok(Number.isFinite(v), `${name} / ${r.shape}: ${k} = ${v}`);
    }
  }
}
