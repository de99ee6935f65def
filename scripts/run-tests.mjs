#!/usr/bin/env node
// Runs every test file under test/ with node's test runner through tsx.
// Node 20 has no glob support in `node --test`, so the files are listed here.
// Usage: node scripts/run-tests.mjs [substring-filter ...]
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

const filters = process.argv.slice(2);
const files = walk('test')
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
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
  { stdio: 'inherit' },
);
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
