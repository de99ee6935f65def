// `idem demo` as a user runs it: the real command in a child process (from source, through tsx), which
// itself runs the billing consumer in further child processes.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { RecordedEvent } from '../../src/core/event.js';
import type { DemoReport } from '../../src/demo/index.js';
import { verify } from '../../src/demo/report.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function idem(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'src/cli/run.ts', ...args],
      { cwd: ROOT, timeout: 50_000, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

describe('idem demo', () => {
  it('--json: survives the kill, the cut, the duplicates and the gap with lost=0 doubled=0 and equal totals', async () => {
    const r = await idem(['demo', '--events', '400', '--json']);
    assert.equal(r.code, 0, `exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
    const report = JSON.parse(r.stdout) as DemoReport;
    console.log(
      `# demo: events=${report.events} delivered=${report.delivered} duplicates=${report.duplicatesSkipped} gaps=${report.gaps} ` +
        `kills=${report.kills} reconnects=${report.reconnects} lost=${report.lost} doubled=${report.doubled} in ${report.durationMs} ms`,
    );
    assert.equal(report.ok, true);
    assert.equal(report.lost, 0);
    assert.equal(report.doubled, 0);
    assert.equal(report.unexpected, 0);
    assert.ok(report.kills >= 1, 'the consumer process was SIGKILLed at least once');
    assert.ok(
      report.crash.unacknowledged > 0 && report.crash.checkpoint > report.crash.cursor,
      'the kill landed between commit and ack',
    );
    assert.ok(report.duplicatesSkipped > 0);
    assert.ok(report.duplicateAppends.appends > 0);
    assert.equal(report.duplicateAppends.answeredDuplicate, report.duplicateAppends.appends);
    assert.ok(report.gaps >= 1 && report.gapsRecovered >= 1, 'a version gap was seen and recovered');
    assert.equal(report.recoveredEvents, 2);
    assert.ok(report.reconnects >= 1, 'the consumer reconnected after the cut');
    assert.equal(
      report.rewind.duplicates,
      report.rewind.delivered,
      'the rewind redelivered everything and all of it was skipped',
    );
    // 400 workload events plus the 3 of the gap arrangement, each applied exactly once.
    assert.equal(report.events, 403);
    assert.equal(report.applied, 403);
    assert.equal(report.ledgerRows, 403);
    assert.deepEqual(report.totals.actual, report.totals.expected);
    assert.equal(report.totals.invoicesEqual, report.totals.expected.invoices);
    assert.equal(report.dir, null);
    // Progress lines go to stderr with --json.
    assert.match(
      r.stderr,
      /crash: process 1 \(pid \d+\) committed up to position \d+ and was SIGKILLed before acknowledging/,
    );
  });

  it('prints progress and a report ending in lost=0 doubled=0; refuses a bad --events with exit 2', async () => {
    const [r, bad] = await Promise.all([
      idem(['demo', '--events', '200']),
      idem(['demo', '--events', 'ten']),
    ]);
    assert.equal(r.code, 0, `exit ${r.code}\n${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /reconnect: cut \d+ connection\(s\)/);
    assert.match(r.stdout, /gap: the entity-version guard saw 1 gap\(s\), read 2 event\(s\) from the stream/);
    assert.match(r.stdout, /kills survived +1 /);
    assert.match(r.stdout, /lost=0 doubled=0 +OK\n$/);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /--events/);
  });
});

describe("the demo's exactly-once check", () => {
  const event = (
    id: string,
    version: number,
    type: string,
    data: Record<string, number | string>,
  ): RecordedEvent => ({
    id,
    stream: 'invoice-1',
    type,
    version,
    position: version,
    data,
    metadata: {},
    recordedAt: new Date(0).toISOString(),
  });
  const events = [
    event('a', 1, 'invoice.issued', { customer: 'c' }),
    event('b', 2, 'invoice.line_added', { amount: 10 }),
    event('c', 3, 'invoice.paid', { amount: 10 }),
  ];

  it('counts a doubled and a lost application, and an invoice that differs from the fold', () => {
    const v = verify(events, {
      invoices: new Map([['invoice-1', { customer: 'c', total: 20, paid: 0, events: 3, version: 2 }]]),
      applications: new Map([
        ['a', 1],
        ['b', 2],
        ['x', 1],
      ]),
      ledgerRows: 2,
      checkpoint: 2,
    });
    assert.deepEqual(
      {
        lost: v.lost,
        doubled: v.doubled,
        unexpected: v.unexpected,
        applied: v.applied,
        invoicesEqual: v.invoicesEqual,
      },
      { lost: 1, doubled: 1, unexpected: 1, applied: 4, invoicesEqual: 0 },
    );
    assert.deepEqual(v.expected, { invoices: 1, total: 10, paid: 10, events: 3 });
    assert.deepEqual(v.actual, { invoices: 1, total: 20, paid: 0, events: 3 });
  });

  it('passes a target that applied each event once', () => {
    const v = verify(events, {
      invoices: new Map([['invoice-1', { customer: 'c', total: 10, paid: 10, events: 3, version: 3 }]]),
      applications: new Map(events.map((e) => [e.id, 1])),
      ledgerRows: 3,
      checkpoint: 3,
    });
    assert.deepEqual([v.lost, v.doubled, v.unexpected, v.invoicesEqual], [0, 0, 0, 1]);
  });
});
