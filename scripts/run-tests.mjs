#!/usr/bin/env node
// Runs every test file under test/ with node's test runner through tsx.
// Node 20 has no glob support in `node --test`, so the files are listed here.
// Usage: node scripts/run-tests.mjs [--fast] [substring-filter ...]
//   --fast leaves out the files that kill processes, smoke-run the benchmarks, inject faults or run
//   the CLI a process per command, runs the suites' small variants and sizes, and runs the files in
//   IDEM_TEST_CONCURRENCY processes (default 3) instead of one per file (the inner loop:
//   `npm run test:fast`); `npm test` runs every file, each in its own process, as CI does.
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { spawn } from 'node:child_process';
import { pathToFileURL } from 'node:url';

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
// --fast runs the files in a few processes, each importing its share of them in turn (see
// `bundles`); `npm test` runs each file in its own process, as CI does.
const concurrency = Number(process.env.IDEM_TEST_CONCURRENCY ?? (fast ? 3 : 2));
const entries = fast ? bundles(files, concurrency) : { paths: files, cleanup: () => {} };
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
    `--test-concurrency=${concurrency}`,
    `--test-timeout=${timeoutMs}`,
    ...entries.paths,
  ],
  // IDEM_TEST_FAST tells the suites to run one variant per kind and their small sizes (test/support/fast.ts).
  { stdio: 'inherit', env: fast ? { ...process.env, IDEM_TEST_FAST: '1' } : process.env },
);
child.on('exit', (code, signal) => {
  entries.cleanup();
  process.exit(code ?? (signal ? 1 : 0));
});

/**
 * Splits the files into `count` entry files, each importing its share in turn, so that the inner
 * loop starts `count` processes instead of one per file: loading the sources through tsx costs a
 * test process about a second of CPU, more than most files' tests take in the inner loop. The
 * files' top-level tests run one after another within an entry; a file that fails to load is a
 * failed test named after it, and the entry goes on with the next file.
 */
function bundles(paths, count) {
  const dir = mkdtempSync(join(tmpdir(), 'idem-test-fast-'));
  const n = Math.max(1, Math.min(count, paths.length));
  const out = [];
  for (let i = 0; i < n; i++) {
    const share = paths.filter((_, j) => j % n === i);
    const entry = join(dir, `fast-${i + 1}-of-${n}.test.mjs`);
    const imports = share.map(
      (f) =>
        `await import(${JSON.stringify(pathToFileURL(resolve(f)).href)}).catch((err) =>\n` +
        `  test(${JSON.stringify(`${f} (loading the file)`)}, () => { throw err; }));\n`,
    );
    writeFileSync(entry, `import { test } from 'node:test';\n${imports.join('')}`);
    out.push(entry);
  }
  return { paths: out, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}
