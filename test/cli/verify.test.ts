import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import type { RecordedEvent } from '../../src/core/index.js';
import { verifyLog, type VerifyReport } from '../../src/cli/verifyLog.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { tempDir } from '../support/index.js';
import { idem, json } from './cli.js';

let n = 0;
function ev(position: number, stream: string, version: number, id = `id-${++n}`): RecordedEvent {
  return {
    id,
    stream,
    version,
    position,
    type: 't',
    data: null,
    metadata: {},
    recordedAt: '2026-01-01T00:00:00.000Z',
  };
}

async function* iterate(events: RecordedEvent[]): AsyncIterable<RecordedEvent> {
  for (const e of events) yield await Promise.resolve(e);
}

const check = (events: RecordedEvent[], head = events.at(-1)?.position ?? 0): Promise<VerifyReport> =>
  verifyLog(iterate(events), head);

describe('verifyLog', () => {
  it('accepts an empty log and a healthy one', async () => {
    assert.equal((await check([])).ok, true);
    const r = await check([ev(1, 'a', 1), ev(2, 'b', 1), ev(3, 'a', 2)]);
    assert.deepEqual([r.ok, r.events, r.streams, r.head], [true, 3, 2, 3]);
  });

  it('finds missing positions, positions out of order, and a head beyond the last event', async () => {
    const gap = await check([ev(1, 'a', 1), ev(4, 'b', 1)]);
    assert.equal(gap.counts.position_gap, 1);
    assert.match(gap.violations[0]!.message, /#2\.\.#3 are missing/);
    const order = await check([ev(1, 'a', 1), ev(3, 'b', 1), ev(2, 'c', 1)], 3);
    assert.equal(order.counts.position_order, 1);
    const head = await check([ev(1, 'a', 1)], 5);
    assert.equal(head.counts.head_mismatch, 1);
    assert.equal(head.ok, false);
  });

  it('finds version gaps and repeated ids', async () => {
    const r = await check([ev(1, 'a', 1, 'x'), ev(2, 'a', 3), ev(3, 'b', 2), ev(4, 'c', 1, 'x')]);
    assert.equal(r.counts.version_gap, 2);
    assert.equal(r.counts.duplicate_id, 1);
    assert.match(
      r.violations.find((v) => v.kind === 'duplicate_id')!.message,
      /id x at #4 was already used at #1/,
    );
  });

  it('keeps at most maxExamples examples but counts every violation', async () => {
    const events = Array.from({ length: 50 }, (_, i) => ev(i + 1, 's', i * 2 + 1));
    const r = await verifyLog(iterate(events), 50, 5);
    assert.equal(r.violations.length, 5);
    assert.equal(r.counts.version_gap, 49);
  });
});

describe('idem verify', () => {
  it('exits 1 and names the violations on a damaged SQLite store', async () => {
    const dir = tempDir();
    try {
      const db = dir.file('idem.db');
      const store = await openSqliteStore({ path: db });
      try {
        await store.append('order-1', [
          { type: 'a', data: 1 },
          { type: 'b', data: 2 },
          { type: 'c', data: 3 },
        ]);
        await store.append('order-2', [{ type: 'a', data: 4 }]);
      } finally {
        await store.close();
      }
      const good = await idem(['verify', '--db', db]);
      assert.equal(good.code, 0, good.stderr);
      // Damage it behind the store's back: lose order-1's version 2 (position 2).
      const raw = new Database(db);
      try {
        raw.prepare('delete from idem_events where position = 2').run();
      } finally {
        raw.close();
      }
      const [human, machine] = await Promise.all([
        idem(['verify', '--db', db]),
        idem(['verify', '--db', db, '--json']),
      ]);
      assert.equal(human.code, 1);
      assert.match(human.stdout, /^FAILED: .*: 3 events in 2 streams, head 4; 2 violations/);
      assert.match(human.stdout, /position_gap: position #2 is missing \(next is #3\)/);
      assert.match(human.stdout, /version_gap: order-1: version 3 at #3 follows version 1/);
      assert.equal(machine.code, 1);
      const report = json<VerifyReport>(machine);
      assert.equal(report.ok, false);
      assert.deepEqual(report.counts, {
        position_gap: 1,
        position_order: 0,
        head_mismatch: 0,
        version_gap: 1,
        duplicate_id: 0,
      });
    } finally {
      await dir.cleanup();
    }
  });
});
