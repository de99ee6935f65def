/**
 * The machine a bench run describes in its report: its CPUs, memory, platform, Node, and how an idle
 * CPU waits for work, which moves every figure that crosses processes (docs/benchmarks.md, "Known to
 * be missed", appends through the server).
 */
import { readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import type { BenchReport } from './types.js';

/** The report's `machine`; `sysRoot` is where `/sys` is read from (tests give a tree of their own). */
export function machineInfo(sysRoot = '/sys'): BenchReport['machine'] {
  const cpuList = cpus();
  const machine: BenchReport['machine'] = {
    cpus: cpuList.length,
    cpuModel: cpuList[0]?.model.trim() ?? 'unknown',
    memoryGb: Math.round(totalmem() / 2 ** 30),
    platform: `${process.platform}-${process.arch}`,
    node: process.version,
  };
  const idle = cpuIdle(sysRoot);
  if (idle !== null) machine.cpuIdle = idle;
  return machine;
}

/**
 * Linux's idle driver (`cpuidle haltpoll`, `cpuidle intel_idle`, ...) and, for `haltpoll` (a guest
 * of a hypervisor), how long an idle CPU polls before it halts: with 0 every wake-up of a process
 * goes through the host. Null where the files are not there (another system, no cpuidle).
 */
export function cpuIdle(sysRoot = '/sys'): string | null {
  const driver = readTrimmed(join(sysRoot, 'devices/system/cpu/cpuidle/current_driver'));
  if (driver === null || driver === '' || driver === 'none') return null;
  if (driver !== 'haltpoll') return `cpuidle ${driver}`;
  const pollNs = readTrimmed(join(sysRoot, 'module/haltpoll/parameters/guest_halt_poll_ns'));
  return pollNs === null ? 'cpuidle haltpoll' : `cpuidle haltpoll, polls up to ${pollNs} ns`;
}

function readTrimmed(path: string): string | null {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return null;
  }
}
