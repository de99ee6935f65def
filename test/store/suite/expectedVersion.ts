import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { ExpectedVersion } from '../../../src/core/expectedVersion.js';
import { randomStream } from '../../support/names.js';
import {
  appendRaw,
  assertNothingSince,
  assertUnchanged,
  events,
  rejectsWith,
  sharedStore,
  withStore,
  type MakeStore,
} from './context.js';

export function expectedVersionTests(make: MakeStore): void {
  describe('expected version', () => {
    const shared = sharedStore(make);
    // [expected, stream version before the append, accepted?]
    const cases: [ExpectedVersion, number, boolean][] = [
      ['any', 0, true],
      ['any', 2, true],
      ['no_stream', 0, true],
      ['no_stream', 2, false],
      ['stream_exists', 0, false],
      ['stream_exists', 2, true],
      [0, 0, true],
      [0, 2, false],
      [2, 2, true],
      [1, 2, false],
      [3, 2, false],
      [5, 0, false],
    ];
    for (const [expected, actual, ok] of cases) {
      it(`${JSON.stringify(expected)} on a stream at version ${actual} is ${ok ? 'accepted' : 'wrong_expected_version'}`, async () => {
        const store = shared();
        const stream = randomStream();
        if (actual > 0) await store.append(stream, events(actual));
        const head = await store.headPosition();
        const p = store.append(stream, events(1), { expectedVersion: expected });
        if (ok) {
          const r = await p;
          assert.equal(r.version, actual + 1);
          assert.equal(r.firstPosition, head + 1);
          assert.equal(await store.streamVersion(stream), actual + 1);
        } else {
          const err = await rejectsWith(p, 'wrong_expected_version');
          assert.equal(err.details.stream, stream);
          assert.equal(err.details.expected, expected);
          assert.equal(err.details.actual, actual);
          assert.ok(
            err.message.includes(String(expected)),
            `message names the expected version: ${err.message}`,
          );
          assert.ok(err.message.includes(String(actual)), `message names the actual version: ${err.message}`);
          await assertNothingSince(store, head, stream, actual);
        }
      });
    }

    it('the default is any', async () => {
      const store = shared();
      const stream = randomStream();
      await store.append(stream, events(1));
      const r = await store.append(stream, events(1));
      assert.equal(r.version, 2);
    });

    it('an expected version applies to the whole batch', async () => {
      const store = shared();
      const stream = randomStream();
      const r = await store.append(stream, events(3), { expectedVersion: 'no_stream' });
      assert.equal(r.version, 3);
      await rejectsWith(store.append(stream, events(3), { expectedVersion: 2 }), 'wrong_expected_version');
      const r2 = await store.append(stream, events(2), { expectedVersion: 3 });
      assert.equal(r2.version, 5);
    });

    for (const bad of [-1, 1.5, 'latest', null, Number.NaN, {}]) {
      it(`expectedVersion ${Number.isNaN(bad) ? 'NaN' : JSON.stringify(bad)} is invalid_input`, async () => {
        const store = shared();
        const stream = randomStream();
        const head = await store.headPosition();
        await rejectsWith(
          appendRaw(store, stream, events(1), { expectedVersion: bad }),
          'invalid_input',
          'expectedVersion',
        );
        await assertNothingSince(store, head, stream, 0);
      });
    }
  });

  describe('concurrent appends', () => {
    it('many concurrent appends expecting the same version: exactly one winner per version', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        const contenders = 6;
        for (let v = 0; v < 8; v++) {
          const results = await Promise.allSettled(
            Array.from({ length: contenders }, (_, k) =>
              store.append(stream, [{ type: 't', data: { v, k } }], { expectedVersion: v }),
            ),
          );
          const won = results.filter((r) => r.status === 'fulfilled');
          assert.equal(won.length, 1, `exactly one winner for expected version ${v}`);
          assert.equal(won[0]!.value.version, v + 1);
          for (const r of results) {
            if (r.status === 'rejected') {
              const err = r.reason as { code?: string; details?: { actual?: number } };
              assert.equal(err.code, 'wrong_expected_version');
              assert.equal(err.details?.actual, v + 1);
            }
          }
        }
        assert.equal(await store.streamVersion(stream), 8);
        await assertUnchanged(store, 8, stream, 8);
      }));

    it('concurrent appends without expectations all land, with contiguous versions and unique positions', () =>
      withStore(make, async (store) => {
        const streams = [randomStream('a'), randomStream('b'), randomStream('c')];
        const n = 60;
        const results = await Promise.all(
          Array.from({ length: n }, (_, i) => store.append(streams[i % 3]!, events(1 + (i % 2), 't', i))),
        );
        const positions = results.flatMap((r) => {
          const out: number[] = [];
          for (let p = r.firstPosition; p <= r.lastPosition; p++) out.push(p);
          return out;
        });
        assert.equal(new Set(positions).size, positions.length, 'no position handed out twice');
        const total = positions.length;
        assert.equal(await store.headPosition(), total);
        for (const s of streams) {
          const versions: number[] = [];
          for await (const e of store.readStream(s)) versions.push(e.version);
          assert.deepEqual(
            versions,
            versions.map((_, i) => i + 1),
            `versions of ${s} are contiguous`,
          );
        }
      }));

    it('the same batch appended concurrently is written once; the others are duplicates of it', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        const b = events(3).map((e) => ({ ...e, id: randomUUID() }));
        const results = await Promise.all(
          Array.from({ length: 8 }, () => store.append(stream, structuredClone(b))),
        );
        assert.equal(results.filter((r) => !r.duplicate).length, 1, 'exactly one original');
        for (const r of results) {
          assert.deepEqual({ ...r, duplicate: false }, { ...results[0]!, duplicate: false });
        }
        await assertUnchanged(store, 3, stream, 3);
      }));
  });
}
