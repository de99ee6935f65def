// The fault scenarios' wait for an in-process consumer: a consumer that keeps committing is waited
// for however long it takes; one that stops committing fails the wait.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createConsumer } from '../../src/consumer/consumer.js';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { sqliteTarget } from '../../src/sqlite/target.js';
import { caughtUpWhileMoving } from '../../faults/catchUp.js';
import { randomConsumer, randomStream } from '../support/names.js';
import { tempDir } from '../support/tempDir.js';
import { until } from '../support/until.js';

/** A promise and the function that resolves it. */
function gate(): { passed: Promise<void>; open: () => void } {
  let open!: () => void;
  const passed = new Promise<void>((resolve) => (open = resolve));
  return { passed, open };
}

describe('faults: caughtUpWhileMoving', () => {
  it('waits on while the position moves, fails when it stops, and resolves once caught up', async () => {
    const dir = tempDir();
    const store = createMemoryStore();
    const target = sqliteTarget(dir.file('target.db'));
    await store.append(
      randomStream('gated'),
      Array.from({ length: 30 }, (_, i) => ({ type: 'T', data: { i } })),
    );
    // The handler stops before event 5 (position 6) and before event 20 (position 21) until told.
    const gates = new Map([
      [5, gate()],
      [20, gate()],
    ]);
    const consumer = createConsumer({
      name: randomConsumer('gated'),
      source: store,
      target,
      batch: { size: 1, catchUpSize: 1 },
      handle: async (e) => {
        await gates.get((e.data as { i: number }).i)?.passed;
      },
    });
    try {
      await consumer.start();
      await until(() => consumer.status().position === 5, { message: 'the consumer at position 5' });
      const waiting = caughtUpWhileMoving(consumer, 1000);
      // Within the first second the consumer moves on to position 20, then stays there for the next.
      gates.get(5)!.open();
      await assert.rejects(waiting, /did not move from position 20 in 1000 ms \(head 30\)/);
      gates.get(20)!.open();
      await caughtUpWhileMoving(consumer, 1000);
      assert.equal(consumer.status().position, 30);
    } finally {
      for (const g of gates.values()) g.open();
      await consumer.stop();
      await target.close();
      await store.close();
      await dir.cleanup();
    }
  });
});
