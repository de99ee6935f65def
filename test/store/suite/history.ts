import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { aggregate } from '../../../src/commands/index.js';
import type { RecordedEvent } from '../../../src/core/event.js';
import type { EventStore, ReadStreamOptions } from '../../../src/core/eventStore.js';
import { randomStream } from '../../support/names.js';
import { collect, rejectsWith, sharedStore, type MakeStore } from './context.js';

/** A stream of five `n.added` events (n = 1..5) with another stream's events between them. */
async function interleaved(store: EventStore): Promise<{ stream: string; mine: RecordedEvent[] }> {
  const stream = randomStream('tally');
  const other = randomStream('other');
  for (let n = 1; n <= 5; n++) {
    await store.append(stream, [{ type: 'n.added', data: { n } }]);
    await store.append(other, [{ type: 'noise', data: null }]);
  }
  return { stream, mine: await collect(store.readStream(stream)) };
}

const sum = (total: number, e: RecordedEvent): number => total + (e.data as { n: number }).n;

function read(store: EventStore, stream: string, options: ReadStreamOptions): Promise<RecordedEvent[]> {
  return collect(store.readStream(stream, options));
}

export function historyTests(make: MakeStore): void {
  describe('history as of a position or a time', () => {
    const shared = sharedStore(make);

    it('readStream toPosition yields the versions at or below the position', async () => {
      const store = shared();
      const { stream, mine } = await interleaved(store);
      const third = mine[2]!;
      assert.deepEqual(await read(store, stream, { toPosition: third.position }), mine.slice(0, 3));
      // A position between two of the stream's events (another stream's event) cuts after the earlier.
      assert.deepEqual(await read(store, stream, { toPosition: third.position + 1 }), mine.slice(0, 3));
      assert.deepEqual(await read(store, stream, { toPosition: mine[0]!.position - 1 }), []);
      assert.deepEqual(await read(store, stream, { toPosition: 0 }), []);
      assert.deepEqual(await read(store, stream, { toPosition: Number.MAX_SAFE_INTEGER }), mine);
      assert.deepEqual(
        await read(store, stream, { toPosition: mine[3]!.position, fromVersion: 2, limit: 2 }),
        mine.slice(1, 3),
        'with fromVersion and limit',
      );
    });

    it('readStream toTime yields the versions recorded at or before the time', async () => {
      const store = shared();
      const { stream, mine } = await interleaved(store);
      for (const cut of mine) {
        const expected = mine.filter((e) => e.recordedAt <= cut.recordedAt);
        assert.deepEqual(await read(store, stream, { toTime: cut.recordedAt }), expected);
        assert.deepEqual(
          await read(store, stream, { toTime: new Date(cut.recordedAt) }),
          expected,
          'as a Date',
        );
      }
      const before = new Date(Date.parse(mine[0]!.recordedAt) - 1).toISOString();
      assert.deepEqual(await read(store, stream, { toTime: before }), []);
      // The same instant written with another zone.
      const first = new Date(mine[0]!.recordedAt);
      const shifted = new Date(first.getTime() + 2 * 3600_000).toISOString().replace('Z', '+02:00');
      assert.deepEqual(
        await read(store, stream, { toTime: shifted }),
        mine.filter((e) => e.recordedAt <= mine[0]!.recordedAt),
      );
    });

    it('aggregate folds the stream, or the stream as of a position or a time', async () => {
      const store = shared();
      const { stream, mine } = await interleaved(store);
      assert.deepEqual(await aggregate(store, stream, sum, 0), { state: 15, version: 5 });
      assert.deepEqual(await aggregate(store, stream, sum, 0, { toPosition: mine[1]!.position }), {
        state: 3,
        version: 2,
      });
      const asOfThird = await aggregate(store, stream, sum, 0, { toTime: mine[2]!.recordedAt });
      const expected = mine.filter((e) => e.recordedAt <= mine[2]!.recordedAt);
      assert.deepEqual(asOfThird, { state: expected.reduce(sum, 0), version: expected.length });
      assert.deepEqual(await aggregate(store, randomStream('none'), sum, 0), { state: 0, version: 0 });
    });

    it('refuses bad bounds, naming the field', async () => {
      const store = shared();
      const stream = randomStream('tally');
      const bad: [ReadStreamOptions, string][] = [
        [{ toPosition: -1 }, 'toPosition'],
        [{ toPosition: 1.5 }, 'toPosition'],
        [{ toPosition: '3' as unknown as number }, 'toPosition'],
        [{ toTime: 'yesterday' }, 'toTime'],
        [{ toTime: '2026-03-01T12:00:00' }, 'toTime'],
        [{ toTime: '2026-13-01T12:00:00Z' }, 'toTime'],
        [{ toTime: new Date(Number.NaN) }, 'toTime'],
        [{ toTime: 5 as unknown as string }, 'toTime'],
        [{ toPosition: 3, toTime: '2026-03-01T12:00:00Z' }, 'toTime'],
      ];
      for (const [options, field] of bad) {
        await rejectsWith(read(store, stream, options), 'invalid_input', field);
      }
    });
  });
}
