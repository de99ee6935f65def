// The machine line of a bench report: the idle driver and, under a hypervisor's haltpoll, its polling.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { cpuIdle, machineInfo } from '../../src/bench/machine.js';
import { formatTable } from '../../src/bench/report.js';
import type { BenchReport } from '../../src/bench/types.js';

const roots: string[] = [];

/** A directory laid out as `/sys` with these files (path under it to contents). */
function sysTree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'idem-sys-'));
  roots.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

const DRIVER = 'devices/system/cpu/cpuidle/current_driver';
const POLL = 'module/haltpoll/parameters/guest_halt_poll_ns';

describe('bench machine', () => {
  afterEach(() => {
    for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
  });

  it('names haltpoll with how long an idle CPU polls', () => {
    assert.equal(
      cpuIdle(sysTree({ [DRIVER]: 'haltpoll\n', [POLL]: '0\n' })),
      'cpuidle haltpoll, polls up to 0 ns',
    );
    assert.equal(
      cpuIdle(sysTree({ [DRIVER]: 'haltpoll\n', [POLL]: '200000\n' })),
      'cpuidle haltpoll, polls up to 200000 ns',
    );
    assert.equal(cpuIdle(sysTree({ [DRIVER]: 'haltpoll\n' })), 'cpuidle haltpoll');
  });

  it('names another driver alone, and nothing where there is none', () => {
    assert.equal(cpuIdle(sysTree({ [DRIVER]: 'intel_idle\n', [POLL]: '0\n' })), 'cpuidle intel_idle');
    assert.equal(cpuIdle(sysTree({ [DRIVER]: 'none\n' })), null);
    assert.equal(cpuIdle(sysTree({})), null);
  });

  it("puts it in the report and on the table's first line", () => {
    const machine = machineInfo(sysTree({ [DRIVER]: 'haltpoll\n', [POLL]: '0\n' }));
    assert.equal(machine.cpuIdle, 'cpuidle haltpoll, polls up to 0 ns');
    assert.equal(machine.node, process.version);
    assert.ok(machine.cpus >= 1);
    const report: BenchReport = {
      startedAt: '2000-01-01T00:00:00.000Z',
      mode: 'quick',
      machine,
      scenarios: [],
      rows: [],
      skipped: [],
      failed: [],
      totalSeconds: 0,
    };
    const first = formatTable(report).split('\n')[0]!;
    assert.ok(first.endsWith(`node ${process.version}, cpuidle haltpoll, polls up to 0 ns`), first);
    const without = machineInfo(sysTree({}));
    assert.equal('cpuIdle' in without, false);
    assert.ok(
      formatTable({ ...report, machine: without })
        .split('\n')[0]!
        .endsWith(`node ${process.version}`),
    );
  });
});
