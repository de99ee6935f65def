#!/usr/bin/env node
// Runs every test file under test/ with node's test runner through tsx.
// Node 20 has no glob support in `node --test`, so the files are listed here.
// Usage: node scripts/run-tests.mjs [--fast] [substring-filter ...]
//   --fast leaves out the files that kill processes, smoke-run the benchmarks, inject faults or run
//   the CLI a process per command (the inner loop: `npm run test:fast`); `npm test` runs every
//   file, as CI does.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';

function walk(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...walk(p));
    else if (name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

/** Files left out by --fast, the slowest kinds: they stay in `npm test` and CI. */
const SLOW = [
  // Real processes killed and restarted.
  'test/faults/',
  'test/demo/demo.test.ts',
  'test/consumer/crash.test.ts',
  'test/consumer/groupProcesses.test.ts',
  'test/store/sqliteProcesses.test.ts',
  'test/postgres/processes.test.ts',
  'test/subscriptions/twoProcess.test.ts',
  'test/effects/dispatcherSqlite.test.ts',
  'test/effects/dispatcherPostgres.test.ts',
  // A real browser against a real server.
  'test/dashboard/',
  // The benchmark's smoke run.
  'test/bench/bench.test.ts',
  // Fault injection: connections cut, fuzzed requests.
  'test/client/cuts.test.ts',
  'test/server/fuzz.test.ts',
  // The CLI end to end, a node process per command.
  'test/cli/appendRead.test.ts',
  'test/cli/consumers.test.ts',
  'test/cli/postgres.test.ts',
  'test/cli/serve.test.ts',
  'test/cli/serveOptions.test.ts',
  'test/cli/tail.test.ts',
  'test/cli/targetFlags.test.ts',
  'test/cli/verify.test.ts',
  'test/cli/verifyConsumer.test.ts',
  'test/cli/verifyConsumerPostgres.test.ts',
  'test/cli/testkitDocs.test.ts',
  'test/cli/secrets.test.ts',
  'test/cli/noStore.test.ts',
  'test/cli/backup.test.ts',
  'test/nats/relayCli.test.ts',
];

const args = process.argv.slice(2);
const fast = args.includes('--fast');
const filters = args.filter((a) => a !== '--fast');
const files = walk('test')
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
  .filter((f) => !fast || !SLOW.some((s) => f.includes(s)))
  .sort();
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
// A test that hangs fails after this long, with its name, instead of stalling the run (CI's budget
// is 15 minutes; the slowest suite takes about 40 s).
const timeoutMs = process.env.IDEM_TEST_TIMEOUT_MS ?? 300_000;
const child = spawn(
  process.execPath,
  [
    '--import',
    'tsx',
    '--test',
    '--test-reporter=spec',
    `--test-concurrency=${process.env.IDEM_TEST_CONCURRENCY ?? 2}`,
    `--test-timeout=${timeoutMs}`,
    ...files,
  ],
  // IDEM_TEST_FAST tells the suites to use their small sizes (the command-contention test: 16 x 10).
  { stdio: 'inherit', env: fast ? { ...process.env, IDEM_TEST_FAST: '1' } : process.env },
);
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
