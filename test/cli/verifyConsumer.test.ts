import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, it } from 'node:test';
import type { VerifyReport } from '../../src/testkit/index.js';
import { tempDir } from '../support/index.js';
import { idem, json } from './cli.js';

const BROKEN = 'examples/testkit/sharedIdentityBroken.ts';
const CORRECT = 'examples/testkit/sharedIdentityCorrect.ts';

describe('idem verify --consumer', () => {
  it('prints the checklist and exits 1 when a statement fails, naming it with the smallest input', async () => {
    const [human, machine] = await Promise.all([
      idem(['verify', '--consumer', BROKEN]),
      idem(['verify', '--consumer', BROKEN, '--json']),
    ]);
    assert.equal(human.code, 1, human.stderr);
    assert.match(human.stdout, /^balances: 60 events on sqlite \(temporary files\)/);
    assert.match(
      human.stdout,
      /\nCursor acknowledgement follows durable processing +FAILS +rebuild +1 of 60 events\n/,
    );
    assert.match(human.stdout, /\nEvery effect has a stable deduplication key +holds\n/);
    assert.match(human.stdout, /smallest input \(1 event\):\n {4}\{"stream":"account-\d"/);
    assert.match(human.stdout, /\$\[0\]: expected \{"account":"account-\d","balance":\d+\}, got nothing/);
    assert.match(human.stdout, /FAILED: 1 of 5 statements fail\n$/);
    assert.equal(machine.code, 1);
    const report = json<VerifyReport>(machine);
    assert.equal(report.ok, false);
    assert.deepEqual(
      report.statements.map((s) => [s.id, s.verdict]),
      [
        ['stable-keys', 'holds'],
        ['atomic-commit', 'holds'],
        ['ack-after-processing', 'fails'],
        ['gaps-and-duplicates', 'holds'],
        ['measured', 'holds'],
      ],
    );
  });

  it('exits 0 when every statement holds, with the history from --events', async () => {
    const dir = tempDir();
    try {
      const events = dir.file('history.jsonl');
      const lines = Array.from({ length: 12 }, (_, i) =>
        JSON.stringify({
          stream: `account-${i % 3}`,
          type: 'deposit.made',
          data: { amount: i + 1, reference: 'x' },
        }),
      );
      writeFileSync(events, `${lines.join('\n')}\n`);
      const r = await idem(['verify', '--consumer', CORRECT, '--events', events]);
      assert.equal(r.code, 0, r.stderr + r.stdout);
      assert.match(r.stdout, /^balances_v1: 12 events on sqlite/);
      assert.match(r.stdout, /ok: every statement holds\n$/);
    } finally {
      await dir.cleanup();
    }
  });

  it('derives the history from a module exporting only samples, prints the seed, and replays it with --seed', async () => {
    const dir = tempDir();
    try {
      const mod = dir.file('samples.mts');
      const example = JSON.stringify(resolve('examples/testkit/mutableKeyBroken.ts'));
      writeFileSync(
        mod,
        [
          `export { consumer, read } from ${example};`,
          'export const samples = [',
          "  { stream: 'account-1', type: 'deposit.made', data: { amount: 5, reference: 'rent' } },",
          "  { stream: 'account-2', type: 'deposit.made', data: { amount: 3, reference: 'rent' } },",
          '];',
          '',
        ].join('\n'),
      );
      const first = await idem(['verify', '--consumer', mod, '--json']);
      assert.equal(first.code, 1, first.stderr + first.stdout);
      const report = json<VerifyReport>(first);
      const seed = report.derived!.seed;
      assert.deepEqual(report.derived, { seed, samples: 2, used: 2, filter: { types: ['deposit.made'] } });
      const keys = report.statements.find((s) => s.id === 'stable-keys')!;
      assert.equal(keys.verdict, 'fails');
      assert.equal(keys.failure!.events.length, 2);
      const replay = await idem(['verify', '--consumer', mod, '--seed', String(seed)]);
      assert.equal(replay.code, 1, replay.stderr);
      assert.match(
        replay.stdout,
        new RegExp(
          `^balances_v1: ${report.events} events derived from 2 samples with seed ${seed} \\(replay: --seed ${seed}\\) on sqlite`,
        ),
      );
      assert.match(
        replay.stdout,
        /\nEvery effect has a stable deduplication key +FAILS +clean +2 of \d+ events\n/,
      );
      const bad = await idem(['verify', '--consumer', mod, '--seed', 'x1']);
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /--seed must be an integer from 0 to 2147483647/);
      const withEvents = await idem(['verify', '--consumer', CORRECT, '--seed', '3']);
      assert.equal(withEvents.code, 2);
      assert.match(withEvents.stderr, /--seed applies only to a module that exports samples/);
    } finally {
      await dir.cleanup();
    }
  });

  it('exits 2 and says what a module lacks; refuses a bad --events line', async () => {
    const dir = tempDir();
    try {
      const mod = dir.file('half.mjs');
      writeFileSync(mod, 'export const consumer = () => null;\n');
      const r = await idem(['verify', '--consumer', mod]);
      assert.equal(r.code, 2);
      assert.match(
        r.stderr,
        /half\.mjs does not export read \(a function \(target, \{ version \}\) => JSON state\); nor events \(.*\) nor samples \(example events to derive a history from\), or give --events FILE\.jsonl/,
      );
      const bad = dir.file('bad.jsonl');
      writeFileSync(bad, '{"stream":"a","type":"t","data":1}\nnot json\n');
      const e = await idem(['verify', '--consumer', CORRECT, '--events', bad]);
      assert.equal(e.code, 2);
      assert.match(e.stderr, /--events line 2: must be JSON/);
      const both = await idem(['verify', '--consumer', CORRECT, '--db', dir.file('x.db')]);
      assert.equal(both.code, 2);
      assert.match(both.stderr, /give no --db or --url/);
    } finally {
      await dir.cleanup();
    }
  });
});
