import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type Database from 'better-sqlite3';
import fc from 'fast-check';
import { createConsumer, type Consumer } from '../../src/consumer/consumer.js';
import type { Guard } from '../../src/consumer/guards.js';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { bySpeed } from '../support/fast.js';
import { faultySource, faultyTarget, type SourceFaults, type TargetFaults } from './support/faults.js';
import { makeSqliteFixture } from './support/targetFixture.js';

// Model-based: random appends, crashes before the commit and before the ack, restarts, cursor
// rewinds; after every settle the output equals the exactly-once totals. fast-check prints the seed
// and the shrunk command list of a failure.

type Op =
  | { kind: 'append'; stream: number; amounts: number[] }
  | { kind: 'failRecord' }
  | { kind: 'failAck' }
  | { kind: 'restart' }
  | { kind: 'rewind'; fraction: number }
  | { kind: 'settle' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('append' as const),
      stream: fc.integer({ min: 0, max: 3 }),
      amounts: fc.array(fc.integer({ min: 1, max: 100 }), { minLength: 1, maxLength: 4 }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'failRecord' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'failAck' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'restart' as const }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('rewind' as const),
      fraction: fc.double({ min: 0, max: 1, noNaN: true }),
    }),
  },
  { weight: 2, arbitrary: fc.constant({ kind: 'settle' as const }) },
);

async function runModel(ops: Op[], guard: Guard[]): Promise<void> {
  const fx = await makeSqliteFixture();
  const store = createMemoryStore();
  const sourceFaults: SourceFaults = {};
  const targetFaults: TargetFaults = {};
  const source = faultySource(store, sourceFaults);
  const target = faultyTarget(fx.target, targetFaults);
  const model = new Map<string, number>();
  let events = 0;
  await fx.createTable('out');
  const make = (): Consumer =>
    createConsumer<Database.Database>({
      name: 'model_v1',
      source,
      target,
      guard,
      batch: { size: 3, catchUpSize: 9 },
      reconnect: { initialDelayMs: 1, maxDelayMs: 4 },
      handle: (e, ctx) => fx.add(ctx.tx, 'out', e.stream, (e.data as { amount: number }).amount),
    });
  let consumer = make();
  const settle = async (): Promise<void> => {
    await consumer.whenCaughtUp({ timeoutMs: 10_000 });
    const totals = await fx.totals('out');
    assert.deepEqual(new Map([...totals].map(([s, t]) => [s, t.total])), model);
    if (guard.includes('event-id')) assert.equal(await fx.target.ledgerSize('model_v1'), events);
  };
  try {
    await consumer.start();
    for (const op of [...ops, { kind: 'settle' } as const]) {
      switch (op.kind) {
        case 'append': {
          const stream = `acct-${op.stream}`;
          await store.append(
            stream,
            op.amounts.map((amount) => ({ type: 'credited', data: { amount } })),
          );
          model.set(stream, (model.get(stream) ?? 0) + op.amounts.reduce((a, b) => a + b, 0));
          events += op.amounts.length;
          break;
        }
        case 'failRecord':
          targetFaults.failRecords = (targetFaults.failRecords ?? 0) + 1;
          break;
        case 'failAck':
          sourceFaults.failAcks = (sourceFaults.failAcks ?? 0) + 1;
          break;
        case 'restart':
          await consumer.stop();
          consumer = make();
          await consumer.start();
          break;
        case 'rewind': {
          await consumer.stop();
          const position = (await store.consumers.get('model_v1')).position;
          await store.consumers.reset('model_v1', Math.floor(op.fraction * position));
          consumer = make();
          await consumer.start();
          break;
        }
        case 'settle':
          await settle();
          break;
      }
    }
  } finally {
    await consumer.stop();
    await store.close();
    await fx.cleanup();
  }
}

const runs = Number(process.env.IDEM_MODEL_RUNS ?? bySpeed(40, 10));

describe('consumer model: appends, crashes before commit and ack, restarts, rewinds', () => {
  for (const guard of [
    ['event-id'],
    ['entity-version'],
    ['entity-version', 'event-id'],
  ] satisfies Guard[][]) {
    it(`guard ${guard.join(' + ')} (${runs} runs)`, async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(opArb, { maxLength: 25 }), (ops) => runModel(ops, guard)),
        { numRuns: runs },
      );
    });
  }
});
