import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RecordedEvent } from '../../src/core/event.js';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import type Database from 'better-sqlite3';
import { resolveOptions, type AnyEvents, type ResolvedOutage } from '../../src/consumer/options.js';
import { OutageDetector } from '../../src/consumer/outageDetector.js';
import { sqliteTarget } from '../../src/sqlite/target.js';
import { tempDir } from '../support/tempDir.js';

// The rule with the documented defaults (10 entities within 30 s, held 1 s without a new failing
// entity), on a clock the test moves.

async function defaults(): Promise<ResolvedOutage> {
  const dir = tempDir();
  const store = createMemoryStore();
  const target = sqliteTarget(dir.file('target.db'));
  try {
    const o = resolveOptions<Database.Database, AnyEvents>({
      name: 'billing_v1',
      source: store,
      target,
      handle: () => undefined,
      onError: { then: 'dead-letter' },
    });
    return o.onError.outage!;
  } finally {
    await target.close();
    await store.close();
    await dir.cleanup();
  }
}

function event(stream: string, position: number): RecordedEvent {
  return {
    id: `e${position}`,
    stream,
    version: 1,
    position,
    type: 'amount.added',
    data: {},
    metadata: {},
    recordedAt: '2026-01-01T00:00:00.000Z',
  };
}

/** A detector on a clock at `clock.now`, with the defaults. */
async function detector(): Promise<{ d: OutageDetector; clock: { now: number } }> {
  const clock = { now: 1_000_000 };
  return { d: new OutageDetector(await defaults(), () => clock.now), clock };
}

/** Fails `e` for good and holds it, as a batch does when the verdict is `hold`. */
function failAndHold(d: OutageDetector, e: RecordedEvent): 'outage' | 'hold' {
  const verdict = d.failed(e.stream);
  if (verdict === 'hold') d.hold(e, new Error(`down for ${e.stream}`), 3);
  return verdict;
}

describe('outage detector (the documented defaults)', () => {
  it('resolves to 10 entities, a 30 s window, a 1 s hold, probes from 1 s doubling to 60 s', async () => {
    const o = await defaults();
    assert.deepEqual(o, {
      entities: 10,
      windowMs: 30_000,
      holdMs: 1000,
      probeDelayMs: 1000,
      maxProbeDelayMs: 60_000,
    });
    const { d } = await detector();
    assert.deepEqual(
      [1, 2, 3, 7, 8, 20].map((n) => d.probeDelay(n)),
      [1000, 2000, 4000, 60_000, 60_000, 60_000],
    );
  });

  it('a streak growing one entity every 900 ms across batches holds everything, and the 10th entity is an outage', async () => {
    const { d, clock } = await detector();
    const events = Array.from({ length: 10 }, (_, i) => event(`invoice-${i}`, i + 1));
    for (const e of events.slice(0, 9)) {
      assert.equal(failAndHold(d, e), 'hold');
      clock.now += 900;
      // Every held entity is still waiting: the streak grew less than a hold ago.
      for (const h of events.slice(0, events.indexOf(e) + 1)) assert.equal(d.heldFailure(h)?.poison, false);
    }
    assert.equal(d.failed(events[9]!.stream), 'outage');
  });

  it('a lone failure is poison once the streak has not grown for the 1 s hold, not after the 30 s window', async () => {
    const { d, clock } = await detector();
    const poison = event('invoice-bad', 7);
    assert.equal(failAndHold(d, poison), 'hold');
    assert.equal(d.dueAt(), clock.now + 1001);
    clock.now += 999;
    assert.equal(d.heldFailure(poison)?.poison, false);
    clock.now += 1;
    const held = d.heldFailure(poison);
    assert.equal(held?.poison, true);
    // Alone in its streak: dead-lettered with the failure it had, not tried again.
    assert.equal(held.shared, false);
    assert.equal(held.attempts, 3);
    assert.equal(held.error.message, 'down for invoice-bad');
    // Only the held event itself, not its entity's later events.
    assert.equal(d.heldFailure(event('invoice-bad', 8)), null);
    d.deadLettered(poison.stream);
    assert.equal(d.heldFailure(poison), null);
    assert.equal(d.dueAt(), Infinity);
  });

  it('another entity handled makes the held failures poison at once; those of a streak of several get a last attempt', async () => {
    const { d, clock } = await detector();
    const a = event('invoice-a', 1);
    const b = event('invoice-b', 2);
    failAndHold(d, a);
    assert.equal(d.heldFailure(a)?.shared, false);
    failAndHold(d, b);
    assert.equal(d.heldFailure(a)?.poison, false);
    // Two entities failed together: each gets one last attempt before it is dead-lettered.
    assert.equal(d.heldFailure(a)?.shared, true);
    assert.equal(d.heldFailure(b)?.shared, true);
    d.succeeded('invoice-c');
    assert.equal(d.heldFailure(a)?.poison, true);
    assert.equal(d.heldFailure(b)?.poison, true);
    assert.equal(d.dueAt(), clock.now);
    // The streak ended: counting starts again.
    for (let i = 0; i < 9; i++) assert.equal(d.failed(`invoice-n${i}`), 'hold');
    assert.equal(d.failed('invoice-n9'), 'outage');
  });

  it('failures older than the 30 s window leave the streak: they do not count, and a held one is poison', async () => {
    const { d, clock } = await detector();
    const first = event('invoice-0', 1);
    failAndHold(d, first);
    // The streak keeps growing, one new entity every 3.8 s: slower than 10 per 30 s.
    const rest: RecordedEvent[] = [];
    for (let i = 1; i <= 8; i++) {
      clock.now += 3800;
      const e = event(`invoice-${i}`, i + 1);
      rest.push(e);
      assert.equal(failAndHold(d, e), 'hold');
    }
    // 30.4 s after the first failure: it left the window.
    assert.equal(d.heldFailure(first)?.poison, true);
    assert.equal(d.heldFailure(rest[0]!)?.poison, false);
    d.deadLettered(first.stream);
    clock.now += 900;
    // Nine entities failed, but only eight within the window.
    assert.equal(d.failed('invoice-9'), 'hold');
    assert.equal(d.failed('invoice-10'), 'outage');
  });

  it('restore undoes what a rolled-back transaction told it', async () => {
    const { d } = await detector();
    const a = event('invoice-a', 1);
    assert.equal(d.snapshot(), null);
    failAndHold(d, a);
    const before = d.snapshot();
    d.succeeded('invoice-b');
    assert.equal(d.heldFailure(a)?.poison, true);
    d.restore(before);
    assert.equal(d.heldFailure(a)?.poison, false);
    d.restore(null);
    assert.equal(d.heldFailure(a), null);
  });
});
