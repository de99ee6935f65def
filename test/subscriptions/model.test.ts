// Model test: random appends, partial acks and crashes with resubscription. Checks
// that the events handled at least once are exactly the committed events matching the filter, that
// every session delivers the matching events after its start position in position order with none
// missing, and that a session starts at the last acknowledged position.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { EventStore } from '../../src/core/eventStore.js';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { pgTestContext } from '../postgres/pgFixtures.js';
import { bySpeed } from '../support/fast.js';
import { tempDir } from '../support/tempDir.js';
import { until } from '../support/until.js';
import { Reader, readAllEvents } from './suite/context.js';

type Op = { t: 'append'; stream: number; types: ('a' | 'b')[] } | { t: 'ack'; frac: number } | { t: 'crash' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant('append' as const),
      stream: fc.nat(2),
      types: fc.array(fc.constantFrom('a' as const, 'b' as const), { minLength: 1, maxLength: 3 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant('ack' as const),
      frac: fc.double({ min: 0, max: 1, noNaN: true }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('crash' as const) }) },
);

const FILTER = { types: ['a'] };
const NAME = 'model_v1';

interface Session {
  reader: Reader;
  start: number;
}

/**
 * The stored cursor is the last acknowledged position, or further on past events the filter leaves
 * out (the engine moves it there when nothing delivered awaits an ack): never past a matching event
 * that was not acknowledged.
 */
async function assertCursor(store: EventStore, cursor: number, acked: number): Promise<void> {
  assert.ok(cursor >= acked, `the cursor (${cursor}) is at least the last ack (${acked})`);
  const skipped = (await readAllEvents(store)).filter(
    (e) => e.type === 'a' && e.position > acked && e.position <= cursor,
  );
  assert.deepEqual(skipped, [], 'the cursor passed only events the filter leaves out');
}

async function runModel(store: EventStore, ops: Op[]): Promise<void> {
  const open = async (): Promise<Session> => {
    const sub = await store.subscribe(NAME, { filter: FILTER, maxInFlight: 3, batchSize: 2 });
    return { reader: new Reader(sub, false), start: sub.startPosition };
  };
  const sessions: Session[] = [];
  let acked = 0;
  let current = await open();
  sessions.push(current);
  try {
    for (const op of ops) {
      if (op.t === 'append') {
        await store.append(
          `m-${op.stream}`,
          op.types.map((type) => ({ type, data: null })),
        );
      } else if (op.t === 'ack') {
        const got = current.reader.positions;
        if (got.length === 0) continue;
        const p = got[Math.min(got.length - 1, Math.floor(op.frac * got.length))]!;
        await current.reader.sub.ack(p);
        acked = Math.max(acked, p);
      } else {
        await current.reader.stop(); // the owner goes away with unacknowledged events in flight
        current = await open();
        sessions.push(current);
        await assertCursor(store, current.start, acked);
        acked = current.start;
      }
    }
    // Drain: keep acknowledging until the last session has everything after its start.
    const committed = (await readAllEvents(store)).filter((e) => e.type === 'a');
    const want = committed.filter((e) => e.position > current.start).length;
    await until(
      async () => {
        const got = current.reader.positions;
        if (got.length > 0 && got[got.length - 1]! > acked) {
          acked = got[got.length - 1]!;
          await current.reader.sub.ack(acked);
        }
        if (current.reader.error) throw current.reader.error as Error;
        return got.length >= want;
      },
      { timeoutMs: 10_000, message: 'the last session to drain' },
    );
    for (const s of sessions) {
      const expected = committed.filter((e) => e.position > s.start).map((e) => e.position);
      const got = s.reader.positions;
      assert.deepEqual(
        got,
        expected.slice(0, got.length),
        'a session delivers a gap-free prefix in position order',
      );
      assert.ok(s.reader.messages.every((m) => m.kind !== 'events' || !m.redelivery));
    }
    const handled = new Set(sessions.flatMap((s) => s.reader.events.map((e) => e.id)));
    assert.deepEqual(
      [...handled].sort(),
      committed.map((e) => e.id).sort(),
      'handled at least once == committed matching',
    );
    await assertCursor(store, (await store.consumers.get(NAME)).position, acked);
  } finally {
    await current.reader.stop();
  }
}

const runs = Number(process.env.IDEM_MODEL_RUNS ?? bySpeed(100, 20));
const pg = await pgTestContext();

describe('subscription model: subscribe / ack / crash / resubscribe', () => {
  it(`memory store (${runs} runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 30 }), async (ops) => {
        const store = createMemoryStore();
        try {
          await runModel(store, ops);
        } finally {
          await store.close();
        }
      }),
      { numRuns: runs, verbose: 1 },
    );
  });

  it(`SQLite store (${runs} runs)`, async () => {
    const dir = tempDir();
    let n = 0;
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(opArb, { maxLength: 30 }), async (ops) => {
          const store = await openSqliteStore({ path: dir.file(`model-${n++}.db`), durability: 'normal' });
          try {
            await runModel(store, ops);
          } finally {
            await store.close();
          }
        }),
        { numRuns: runs, verbose: 1 },
      );
    } finally {
      await dir.cleanup();
    }
  });

  // PostgreSQL reads ahead (several pages while delivered ones wait): the same model over it.
  const pgRuns = Math.max(1, Math.round(runs / 4));
  it(`PostgreSQL store (${pgRuns} runs, pages read ahead)`, { skip: pg.skip }, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 30 }), async (ops) => {
        const store = await pg.openSharedStore();
        try {
          await runModel(store, ops);
        } finally {
          await store.close();
        }
      }),
      { numRuns: pgRuns, verbose: 1 },
    );
  });
});
