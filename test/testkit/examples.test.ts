// The three failure modes of the idempotent-consumer pattern, each found by verifyConsumer on its own
// (broken consumer: the statement fails, with a shrunk input), each fixed by the consumer beside it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SqliteTarget } from '../../src/sqlite/index.js';
import {
  verifyConsumer,
  type ConsumerFactory,
  type StateReader,
  type StatementId,
  type TestEvent,
  type VerifyReport,
} from '../../src/testkit/index.js';
import * as blindBroken from '../../examples/testkit/blindIncrementBroken.js';
import * as blindCorrect from '../../examples/testkit/blindIncrementCorrect.js';
import * as keyBroken from '../../examples/testkit/mutableKeyBroken.js';
import * as keyCorrect from '../../examples/testkit/mutableKeyCorrect.js';
import * as identityBroken from '../../examples/testkit/sharedIdentityBroken.js';
import * as identityCorrect from '../../examples/testkit/sharedIdentityCorrect.js';

interface Example {
  consumer: ConsumerFactory<SqliteTarget>;
  read: StateReader<SqliteTarget>;
  events: TestEvent[];
}

const verify = (m: Example): Promise<VerifyReport> =>
  verifyConsumer<SqliteTarget>({ consumer: m.consumer, read: m.read, events: m.events, shrinkRuns: 25 });

function verdicts(r: VerifyReport): Record<StatementId, string> {
  return Object.fromEntries(r.statements.map((s) => [s.id, s.verdict])) as Record<StatementId, string>;
}

const holdsAll = {
  'stable-keys': 'holds',
  'atomic-commit': 'holds',
  'ack-after-processing': 'holds',
  'gaps-and-duplicates': 'holds',
  measured: 'holds',
};

describe('examples/testkit: the failure modes of the pattern', () => {
  it('a blind increment through a second connection fails "output and processed marker commit atomically"', async () => {
    const r = await verify(blindBroken);
    assert.equal(r.ok, false);
    assert.deepEqual(verdicts(r), { ...holdsAll, 'atomic-commit': 'fails' });
    const s = r.statements.find((x) => x.id === 'atomic-commit')!;
    assert.equal(s.statement, 'Output and processed marker commit atomically');
    const f = s.failure!;
    assert.match(f.scenario, /^(crash-in-batch|poison)$/);
    // One event is enough: its batch rolls back after the increment, and the redelivery adds it again.
    assert.equal(f.events.length, 1);
    const d = f.difference[0]!;
    assert.equal(d.path, '$[0].balance');
    assert.equal(d.actual, 2 * (d.expected as number));
  });

  it('the same consumer writing through ctx.tx holds every statement, its receipts dispatched once', async () => {
    const r = await verify(blindCorrect);
    assert.deepEqual(verdicts(r), holdsAll);
    assert.equal(r.ok, true);
    assert.equal(r.scenarios.find((s) => s.id === 'version-gap')!.outcome, 'skipped');
    assert.ok(r.scenarios.filter((s) => s.outcome === 'ok').length >= 8);
  });

  it('a dedup key from a mutable payload field fails "every effect has a stable deduplication key"', async () => {
    const r = await verify(keyBroken);
    assert.deepEqual(verdicts(r), { ...holdsAll, 'stable-keys': 'fails' });
    const f = r.statements.find((x) => x.id === 'stable-keys')!.failure!;
    assert.equal(f.scenario, 'clean');
    assert.match(f.message, /two different facts share a dedup key and one is lost/);
    // The clean run names the first lost deposit and counts the others, in one note.
    const notes = r.scenarios.find((x) => x.id === 'clean')!.notes;
    assert.equal(notes.length, 1);
    assert.match(notes[0]!, /one is lost \(and \d+ more lost the same way, at positions (\d+, ){5}\.\.\.\)$/);
    // Two deposits with one reference.
    assert.equal(f.events.length, 2);
    const [a, b] = f.events as [TestEvent, TestEvent];
    assert.deepEqual(
      (a.data as { reference: string }).reference,
      (b.data as { reference: string }).reference,
    );
  });

  it('the event-id guard holds every statement', async () => {
    assert.deepEqual(verdicts(await verify(keyCorrect)), holdsAll);
  });

  it('two versions sharing one identity fail "cursor acknowledgement follows durable processing"', async () => {
    const r = await verify(identityBroken);
    assert.deepEqual(verdicts(r), { ...holdsAll, 'ack-after-processing': 'fails' });
    const f = r.statements.find((x) => x.id === 'ack-after-processing')!.failure!;
    assert.equal(f.scenario, 'rebuild');
    assert.equal(f.events.length, 1);
    assert.deepEqual(f.difference[0], {
      path: '$[0]',
      expected: { account: f.events[0]!.stream, balance: (f.events[0]!.data as { amount: number }).amount },
      actual: undefined,
    });
    assert.match(r.scenarios.find((s) => s.id === 'rebuild')!.notes.join('\n'), /share one cursor/);
  });

  it('versioned names hold every statement', async () => {
    assert.deepEqual(verdicts(await verify(identityCorrect)), holdsAll);
  });
});
