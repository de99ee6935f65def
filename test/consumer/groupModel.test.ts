// Model test of consumer groups: random sequences of members joining, leaving (stop), being fenced
// (an operator's release of every partition, as a takeover from a dead member does to it) and
// rejoining, with appends in between, against a reference: every appended event handled exactly
// once in the committed output, each entity's versions in order, and never two members holding one
// partition under the same epoch.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type Database from 'better-sqlite3';
import fc from 'fast-check';
import { createConsumer, type Consumer } from '../../src/consumer/consumer.js';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { sqliteTarget } from '../../src/sqlite/target.js';
import { bySpeed } from '../support/fast.js';
import { randomConsumer } from '../support/names.js';
import { tempDir } from '../support/tempDir.js';

type Op =
  | { t: 'append'; stream: number; count: number }
  | { t: 'join' }
  | { t: 'leave'; which: number }
  | { t: 'fence' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant('append' as const),
      stream: fc.nat(11),
      count: fc.integer({ min: 1, max: 4 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('join' as const) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('leave' as const), which: fc.nat(5) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('fence' as const) }) },
);

const PARTITIONS = 4;

/** Claims (partition, epoch) of the live members: one member per pair, or the epochs fence nothing. */
function assertNoTwoOwners(members: Consumer[]): void {
  const seen = new Map<string, string>();
  for (const m of members) {
    const s = m.status();
    for (const p of s.partitions ?? []) {
      const key = `${p.index}@${p.epoch}`;
      const other = seen.get(key);
      assert.ok(
        other === undefined,
        `partition ${p.index} epoch ${p.epoch} held by ${other} and ${s.member}`,
      );
      seen.set(key, s.member!);
    }
  }
}

describe('consumer group model (memory store, SQLite target)', () => {
  it('members joining, leaving, fenced and rejoining: each event once, each entity in order, one owner per epoch', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 4, maxLength: 14 }), async (ops) => {
        const store = createMemoryStore();
        const dir = tempDir();
        const target = sqliteTarget(dir.file('target.db'));
        target.db.exec(
          'CREATE TABLE handled (seq INTEGER PRIMARY KEY, stream TEXT NOT NULL, version INTEGER NOT NULL)',
        );
        const name = randomConsumer('model');
        const members: Consumer[] = [];
        const everyone: Consumer[] = [];
        const reference = new Map<string, number>();
        const join = async (): Promise<void> => {
          const c = createConsumer<Database.Database>({
            name,
            source: store,
            target,
            partitions: PARTITIONS,
            leaseTtlMs: 1000,
            reconnect: { initialDelayMs: 5, maxDelayMs: 20 },
            handle: (e, ctx) => {
              ctx.tx.prepare('INSERT INTO handled (stream, version) VALUES (?, ?)').run(e.stream, e.version);
            },
          });
          everyone.push(c);
          await c.start();
          members.push(c);
        };
        try {
          await join();
          for (const op of ops) {
            if (op.t === 'append') {
              const stream = `acct-${op.stream}`;
              await store.append(
                stream,
                Array.from({ length: op.count }, () => ({ type: 'moved', data: {} })),
              );
              reference.set(stream, (reference.get(stream) ?? 0) + op.count);
            } else if (op.t === 'join') {
              if (members.length < 4) await join();
            } else if (op.t === 'leave') {
              if (members.length > 1) await members.splice(op.which % members.length, 1)[0]!.stop();
            } else {
              await store.consumers.release(name);
            }
            assertNoTwoOwners(members);
          }
          // A member left alone (or rejoined) takes every partition without a live lease.
          await members[0]!.whenCaughtUp({ timeoutMs: 30_000 });
          assertNoTwoOwners(members);
          const rows = target.db.prepare('SELECT stream, version FROM handled ORDER BY seq').all() as {
            stream: string;
            version: number;
          }[];
          const last = new Map<string, number>();
          for (const r of rows) {
            assert.equal(
              r.version,
              (last.get(r.stream) ?? 0) + 1,
              `${r.stream} v${r.version} in order, once`,
            );
            last.set(r.stream, r.version);
          }
          assert.deepEqual(new Map([...last].sort()), new Map([...reference].sort()));
        } finally {
          for (const c of everyone) await c.stop().catch(() => undefined);
          await target.close();
          await store.close();
          await dir.cleanup();
        }
      }),
      { numRuns: bySpeed(12, 4) },
    );
  });
});
