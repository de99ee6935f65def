#!/usr/bin/env node
// Runs every test file under test/ with node's test runner through tsx.
// Node 20 has no glob support in `node --test`, so the files are listed here.
// Usage: node scripts/run-tests.mjs [--fast [--measure]] [substring-filter ...]
//   --fast leaves out the files that kill processes, smoke-run the benchmarks, inject faults or run
//   the CLI a process per command, runs the suites' small variants and sizes, and runs the files in
//   IDEM_TEST_CONCURRENCY processes (default 4) instead of one per file, shared out by the seconds
//   each file takes (scripts/test-seconds.json) so that the processes finish together, with their
//   temp files in memory (see `fastEnv`) (the inner loop: `npm run test:fast`); `npm test` runs
//   every file, each in its own process, with temp files on disk, as CI does.
//   --fast --measure runs each matching file alone, one after another, and records its seconds in
//   scripts/test-seconds.json (run it on a quiet machine after adding or changing a slow file).
import {
  accessSync,
  constants,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, sep } from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
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
  'test/cli/userModule.test.ts',
  'test/nats/relayCli.test.ts',
];

const args = process.argv.slice(2);
const fast = args.includes('--fast');
const measure = args.includes('--measure');
const filters = args.filter((a) => a !== '--fast' && a !== '--measure');
const files = walk('test')
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
  .filter((f) => !fast || !SLOW.some((s) => f.includes(s)))
  .sort();
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
const SECONDS = new URL('./test-seconds.json', import.meta.url);
const SHM = '/dev/shm';
if (measure) {
  if (!fast) {
    console.error('--measure times the files of --fast: run it with --fast');
    process.exit(1);
  }
  const env = fastEnv();
  try {
    measureFiles(files, env.env);
  } finally {
    env.cleanup();
  }
  process.exit(0);
}
// --fast runs the files in a few processes, each importing its share of them in turn (see
// `bundles`); `npm test` runs each file in its own process, as CI does. Four for --fast on two cores:
// a test process spends most of its time waiting (lease timers, PostgreSQL, sockets), so a fourth
// share shortens the run more than it adds contention.
const concurrency = Number(process.env.IDEM_TEST_CONCURRENCY ?? (fast ? 4 : 2));
const entries = fast ? bundles(shares(files, concurrency)) : { paths: files, cleanup: () => {} };
const runEnv = fast ? fastEnv() : { env: process.env, cleanup: () => {} };
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
  { stdio: 'inherit', env: runEnv.env },
);
// Ctrl-C reaches the test runner too: wait for it to end, then remove the temp files.
process.on('SIGINT', () => {});
child.on('exit', (code, signal) => {
  entries.cleanup();
  runEnv.cleanup();
  process.exit(code ?? (signal ? 1 : 0));
});

/**
 * Shares the files out among `count` processes, each taking the slowest file left while it has the
 * fewest seconds (longest processing time first), by the seconds each file took alone
 * (scripts/test-seconds.json; a file not listed there counts as the median). Each share keeps the
 * files in name order.
 */
function shares(paths, count) {
  const seconds = JSON.parse(readFileSync(SECONDS, 'utf8'));
  const known = Object.values(seconds).sort((a, b) => a - b);
  const median = known[Math.floor(known.length / 2)] ?? 1;
  const cost = (f) => seconds[f.split(sep).join('/')] ?? median;
  const n = Math.max(1, Math.min(count, paths.length));
  const out = Array.from({ length: n }, () => ({ files: [], seconds: 0 }));
  for (const f of [...paths].sort((a, b) => cost(b) - cost(a) || a.localeCompare(b))) {
    const least = out.reduce((min, s) => (s.seconds < min.seconds ? s : min));
    least.files.push(f);
    least.seconds += cost(f);
  }
  return out.map((s) => s.files.sort());
}

/**
 * Writes an entry file per share, each importing its files in turn, so that the inner loop starts a
 * process per share instead of one per file: loading the sources through tsx costs a test process
 * about a second of CPU, more than most files' tests take in the inner loop. The files' top-level
 * tests run one after another within an entry; a file that fails to load is a failed test named
 * after it, and the entry goes on with the next file.
 */
function bundles(groups) {
  const dir = mkdtempSync(join(tmpdir(), 'idem-test-fast-'));
  const out = groups.map((share, i) => {
    const entry = join(dir, `fast-${i + 1}-of-${groups.length}.test.mjs`);
    const imports = share.map(
      (f) =>
        `await import(${JSON.stringify(pathToFileURL(resolve(f)).href)}).catch((err) =>\n` +
        `  test(${JSON.stringify(`${f} (loading the file)`)}, () => { throw err; }));\n`,
    );
    writeFileSync(entry, `import { test } from 'node:test';\n${imports.join('')}`);
    return entry;
  });
  return { paths: out, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * The environment of --fast: IDEM_TEST_FAST tells the suites to run one variant per kind and their
 * small sizes (test/support/fast.ts); TMPDIR puts the temp files the tests make (SQLite databases,
 * mostly) in a directory of their own on /dev/shm, when there is one, where a commit's fsync returns
 * at once: the suites commit thousands of times, and on a disk each commit blocks its test process
 * until the disk has the data. The code runs the same; `npm test` (and CI) keeps them on disk.
 */
function fastEnv() {
  const env = { ...process.env, IDEM_TEST_FAST: '1' };
  let shm = null;
  try {
    accessSync(SHM, constants.W_OK);
    shm = mkdtempSync(join(SHM, 'idem-test-fast-'));
  } catch {
    return { env, cleanup: () => {} };
  }
  return {
    env: { ...env, TMPDIR: shm },
    cleanup: () => {
      if (process.env.IDEM_KEEP_TEST_DATA !== '1') rmSync(shm, { recursive: true, force: true });
    },
  };
}

/**
 * Runs each file alone with the --fast settings, one after another, and records the seconds it took
 * (its process's wall time) in scripts/test-seconds.json, keeping the other files' figures.
 */
function measureFiles(paths, env) {
  const seconds = JSON.parse(readFileSync(SECONDS, 'utf8'));
  for (const f of paths) {
    const start = performance.now();
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=dot', f], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env,
    });
    const took = Math.round((performance.now() - start) / 100) / 10;
    console.log(`${f}: ${took} s${run.status === 0 ? '' : ' (failed)'}`);
    seconds[f.split(sep).join('/')] = took;
  }
  const sorted = Object.fromEntries(Object.entries(seconds).sort(([a], [b]) => a.localeCompare(b)));
  writeFileSync(SECONDS, `${JSON.stringify(sorted, null, 2)}\n`);
}
