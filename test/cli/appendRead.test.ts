import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { AppendResult, JsonValue, RecordedEvent } from '../../src/core/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { randomStream, tempDir, type TempDir } from '../support/index.js';
import { idem, json } from './cli.js';
import { idemInProcess } from './inProcess.js';

const ID = '0190a6c2-8e1f-7c3a-9b2d-3f4e5a6b7c8d';

/** Appends [stream, type, data] in order through the store itself (the append verb has its own tests). */
async function seed(db: string, events: [string, string, JsonValue][]): Promise<void> {
  const store = await openSqliteStore({ path: db });
  try {
    for (const [stream, type, data] of events) await store.append(stream, [{ type, data }]);
  } finally {
    await store.close();
  }
}

interface ErrorJson {
  error: { code: string; message: string; details: Record<string, unknown> };
}

describe('idem append, read and events on the embedded store', () => {
  let dir: TempDir;
  let db: string;
  before(() => {
    dir = tempDir();
    db = dir.file('nested/dir/idem.db');
  });
  after(() => dir.cleanup());

  it('--help on the program and on every verb answers with examples and exit 0', async () => {
    const verbs = [
      [],
      ['append'],
      ['read'],
      ['events'],
      ['tail'],
      ['consumers'],
      ['consumer'],
      ['consumer', 'reset'],
      ['consumer', 'prune-ledger'],
      ['dlq'],
      ['dlq', 'skip'],
      ['serve'],
      ['verify'],
      ['shred'],
    ];
    // The program's help through the real binary; every verb's help through `main` in this process.
    const results = [
      await idem(['--help']),
      ...(await Promise.all(verbs.slice(1).map((v) => idemInProcess([...v, '--help'])))),
    ];
    results.forEach((r, i) => {
      const verb = verbs[i]!.join(' ') || '(program)';
      assert.equal(r.code, 0, `${verb}: ${r.stderr}`);
      assert.match(r.stdout, /Usage: idem/, verb);
      assert.match(r.stdout, /Examples?:\n\s+\$ idem /, `${verb} has examples`);
    });
    for (const verb of [
      'append',
      'read',
      'events',
      'tail',
      'consumers',
      'consumer',
      'dlq',
      'serve',
      'verify',
      'shred',
    ]) {
      assert.match(results[0]!.stdout, new RegExp(`\\n  ${verb} `), `program help lists ${verb}`);
    }
  });

  it('appends, creating the directory of --db, and prints what it wrote (exit 0)', async () => {
    const stream = randomStream('invoice');
    const r = await idem([
      'append',
      stream,
      '--type',
      'invoice.issued',
      '--data',
      '{"amount":100}',
      '--db',
      db,
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      new RegExp(`appended 1 event to ${stream}: version 1, position \\d+, id [0-9a-f-]{36}`),
    );
    const j = await idem([
      'append',
      stream,
      '--type',
      'invoice.paid',
      '--data',
      '{"amount":100}',
      '--metadata',
      '{"commandId":"c-1"}',
      '--db',
      db,
      '--json',
    ]);
    assert.equal(j.code, 0, j.stderr);
    const result = json<AppendResult>(j);
    assert.equal(result.stream, stream);
    assert.equal(result.version, 2);
    assert.equal(result.duplicate, false);
    assert.equal(result.firstPosition, result.lastPosition);
    assert.equal(result.ids.length, 1);
  });

  it('a duplicate append exits 0 and says "duplicate: nothing written"; --json shows duplicate: true', async () => {
    const stream = randomStream('invoice');
    const args = [
      'append',
      stream,
      '--type',
      'invoice.issued',
      '--data',
      '{"amount":5}',
      '--id',
      ID.replace(/^0/, '1'),
      '--db',
      db,
    ];
    const first = await idem([...args, '--json']);
    assert.equal(first.code, 0, first.stderr);
    const again = await idem(args);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /^duplicate: nothing written/);
    const againJson = await idem([...args, '--json']);
    assert.equal(againJson.code, 0, againJson.stderr);
    assert.deepEqual(json(againJson), { ...json<AppendResult>(first), duplicate: true });
    const read = await idem(['read', stream, '--db', db, '--json']);
    assert.equal(json<RecordedEvent[]>(read).length, 1, 'nothing was written by the duplicates');
  });

  it('conflicts exit 3 with "idem: <code>: <message>" on stderr and a JSON error with --json', async () => {
    const stream = randomStream('invoice');
    const base = ['append', stream, '--type', 'invoice.issued', '--db', db];
    assert.equal((await idem([...base, '--data', '1', '--id', ID])).code, 0);
    const [reused, wrongVersion, wrongVersionJson] = await Promise.all([
      idem([...base, '--data', '2', '--id', ID]),
      idem([...base, '--data', '3', '--expected-version', '0']),
      idem([...base, '--data', '3', '--expected-version', 'no_stream', '--json']),
    ]);
    assert.equal(reused.code, 3);
    assert.match(reused.stderr, /^idem: idempotency_conflict: .*0190a6c2/m);
    assert.equal(wrongVersion.code, 3);
    assert.match(
      wrongVersion.stderr,
      /^idem: wrong_expected_version: .*expected version 0, but the stream is at version 1/m,
    );
    assert.equal(wrongVersionJson.code, 3);
    const err = json<ErrorJson>(wrongVersionJson).error;
    assert.equal(err.code, 'wrong_expected_version');
    assert.equal(err.details.actual, 1);
    const ok = await idem([...base, '--data', '4', '--expected-version', '1', '--json']);
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(json<AppendResult>(ok).version, 2);
  });

  it('usage errors and invalid input exit 2 with a message naming the option or field', async () => {
    const stream = randomStream('invoice');
    const cases: { args: string[]; stderr: RegExp }[] = [
      {
        args: ['append', stream, '--type', 't', '--data', '{bad', '--db', db],
        stderr: /^idem: invalid_input: --data: must be valid JSON/m,
      },
      {
        args: ['append', stream, '--type', 't', '--data', '1', '--metadata', '[1]', '--db', db],
        stderr: /^idem: invalid_input: --metadata: must be a JSON object/m,
      },
      {
        args: ['append', stream, '--type', 't', '--data', '1', '--id', 'not-a-uuid', '--db', db],
        stderr: /^idem: invalid_input: --id: must be a UUID/m,
      },
      {
        args: ['append', ' padded ', '--type', 't', '--data', '1', '--db', db],
        stderr: /^idem: invalid_input: <stream>: must not start or end with whitespace/m,
      },
      {
        args: ['append', stream, '--type', '', '--data', '1', '--db', db],
        stderr: /^idem: invalid_input: --type: /m,
      },
      {
        args: ['append', stream, '--type', 't', '--data', '1', '--expected-version', 'soon', '--db', db],
        stderr: /^idem: invalid_input: --expected-version: /m,
      },
      {
        args: ['append', stream, '--data', '1', '--db', db],
        stderr: /^idem: usage: required option '--type <type>' not specified/m,
      },
      {
        args: ['read', stream, '--limit', '0', '--db', db],
        stderr: /^idem: invalid_input: --limit: must be an integer >= 1/m,
      },
      { args: ['events', '--after', '-1', '--db', db], stderr: /^idem: (usage|invalid_input): .*--after/m },
      { args: ['read', stream, '--lmit', '3', '--db', db], stderr: /^idem: usage: unknown option '--lmit'/m },
      { args: ['frobnicate'], stderr: /^idem: usage: unknown command 'frobnicate'/m },
      { args: ['bench', '--bogus'], stderr: /^idem: usage: unknown option '--bogus'/m },
      { args: ['bench', '--scale', 'big'], stderr: /^idem: invalid_input: --scale: must be a number > 0/m },
      {
        args: ['bench', '--rounds', '0'],
        stderr: /^idem: invalid_input: --rounds: must be a whole number from 1 to 20/m,
      },
      {
        args: ['bench', '--rounds', '2.5'],
        stderr: /^idem: invalid_input: --rounds: must be a whole number from 1 to 20/m,
      },
      {
        args: ['read', stream, '--db', db, '--postgres', 'postgres://x'],
        stderr: /^idem: usage: choose one of --db, --postgres and --url/m,
      },
    ];
    // A few through the real binary, the rest through `main` in this process.
    const results = await Promise.all(
      cases.map((c, i) => (i % 4 === 0 ? idem(c.args) : idemInProcess(c.args))),
    );
    results.forEach((r, i) => {
      assert.equal(r.code, 2, `${cases[i]!.args.join(' ')}: exit ${r.code}\n${r.stderr}`);
      assert.match(r.stderr, cases[i]!.stderr);
    });
    const read = await idem(['read', stream, '--db', db, '--json']);
    assert.deepEqual(json(read), [], 'nothing was written by the rejected appends');
    const withJson = await idem(['append', stream, '--type', 't', '--data', 'nope', '--db', db, '--json']);
    assert.equal(withJson.code, 2);
    assert.deepEqual(json<ErrorJson>(withJson).error.details.field, '--data');
  });

  it('exits 1 on a failure that is neither usage nor conflict', async () => {
    const r = await idem(['read', 'x', '--db', dir.path]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^idem: unavailable: cannot open the store at /m);
  });

  it('read prints a stream in version order, with --from-version, --limit and --json', async () => {
    const stream = randomStream('order');
    await seed(
      db,
      [1, 2, 3, 4].map((i) => [stream, `order.step${i}`, { i }]),
    );
    const human = await idem(['read', stream, '--db', db]);
    assert.equal(human.code, 0, human.stderr);
    const lines = human.stdout.trim().split('\n');
    assert.equal(lines.length, 4);
    lines.forEach((line, i) =>
      assert.match(
        line,
        new RegExp(`^#\\d+ ${stream}@${i + 1} order\\.step${i + 1} \\S+Z \\{"i":${i + 1}\\}`),
      ),
    );
    const page = await idem(['read', stream, '--from-version', '2', '--limit', '2', '--db', db, '--json']);
    assert.equal(page.code, 0, page.stderr);
    const events = json<RecordedEvent[]>(page);
    assert.deepEqual(
      events.map((e) => e.version),
      [2, 3],
    );
    assert.deepEqual(Object.keys(events[0]!).sort(), [
      'data',
      'id',
      'metadata',
      'position',
      'recordedAt',
      'stream',
      'type',
      'version',
    ]);
    const none = await idem(['read', randomStream('none'), '--db', db]);
    assert.equal(none.code, 0);
    assert.equal(none.stdout, '');
    assert.match(none.stderr, /no events in stream/);
  });

  it('read --as-of prints the stream as it was at a position or a time', async () => {
    const stream = randomStream('order');
    await seed(
      db,
      [1, 2, 3].map((i) => [stream, `order.step${i}`, { i }]),
    );
    const all = json<RecordedEvent[]>(await idem(['read', stream, '--db', db, '--json']));
    const second = all[1]!;
    const byPosition = await idem(['read', stream, '--as-of', String(second.position), '--db', db, '--json']);
    assert.equal(byPosition.code, 0, byPosition.stderr);
    assert.deepEqual(json<RecordedEvent[]>(byPosition), all.slice(0, 2));
    const byTime = await idem(['read', stream, '--as-of', second.recordedAt, '--db', db, '--json']);
    assert.equal(byTime.code, 0, byTime.stderr);
    assert.deepEqual(
      json<RecordedEvent[]>(byTime),
      all.filter((e) => e.recordedAt <= second.recordedAt),
    );
    const before = await idem(['read', stream, '--as-of', String(all[0]!.position - 1), '--db', db]);
    assert.equal(before.code, 0);
    assert.match(before.stderr, /no events in stream .* as of /);
    const bad = await idem(['read', stream, '--as-of', 'last tuesday', '--db', db]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--as-of/);
  });

  it('events filters by --after, repeated --type, --category, --prefix and --limit', async () => {
    const a = randomStream('shipA');
    const b = randomStream('shipB');
    await seed(db, [
      [a, 'ship.created', 1],
      [b, 'ship.moved', 2],
      [a, 'ship.sunk', 3],
    ]);
    const all = json<RecordedEvent[]>(await idem(['events', '--db', db, '--json']));
    const mine = all.filter((e) => e.stream === a || e.stream === b);
    assert.equal(mine.length, 3);
    for (let i = 1; i < all.length; i++) assert.ok(all[i]!.position > all[i - 1]!.position, 'position order');
    const start = mine[0]!.position - 1;
    const [types, category, prefix, limited, afterLast] = await Promise.all([
      idem([
        'events',
        '--after',
        String(start),
        '--type',
        'ship.created',
        '--type',
        'ship.sunk',
        '--db',
        db,
        '--json',
      ]),
      idem(['events', '--category', a.split('-')[0]!, '--db', db, '--json']),
      idem(['events', '--prefix', b, '--db', db]),
      idem(['events', '--after', String(start), '--limit', '2', '--db', db, '--json']),
      idem(['events', '--after', String(mine[2]!.position), '--db', db, '--json']),
    ]);
    assert.deepEqual(
      json<RecordedEvent[]>(types).map((e) => e.type),
      ['ship.created', 'ship.sunk'],
    );
    assert.deepEqual(
      json<RecordedEvent[]>(category).map((e) => e.stream),
      [a, a],
    );
    assert.equal(prefix.code, 0, prefix.stderr);
    assert.match(prefix.stdout.trim(), new RegExp(`^#\\d+ ${b}@1 ship\\.moved `));
    assert.equal(prefix.stdout.trim().split('\n').length, 1);
    assert.deepEqual(
      json<RecordedEvent[]>(limited).map((e) => e.stream),
      [a, b],
    );
    assert.deepEqual(json(afterLast), []);
  });

  it('verify reports a healthy store with exit 0', async () => {
    const [human, machine] = await Promise.all([
      idem(['verify', '--db', db]),
      idem(['verify', '--db', db, '--json']),
    ]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(
      human.stdout,
      /^ok: .*idem\.db: \d+ events in \d+ streams, head \d+; positions gap-free, versions contiguous, ids unique/,
    );
    const report = json<{ ok: boolean; events: number; head: number; violations: unknown[] }>(machine);
    assert.equal(report.ok, true);
    assert.equal(report.events, report.head);
    assert.deepEqual(report.violations, []);
  });
});
