import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { randomStream } from '../../support/names.js';
import { until } from '../../support/until.js';
import { withHarness } from '../support/harness.js';
import type { MakeTargetFixture } from '../support/targetFixture.js';

/** What operators do to a running consumer (pause, resume), and what it does by itself (redrive). */
export function describeOperations<Tx>(label: string, make: MakeTargetFixture<Tx>): void {
  describe(`consumer operations (${label})`, () => {
    it('a paused consumer shows paused, stays paused across a restart, and resumes at its cursor', () =>
      withHarness(make, async (h) => {
        const s = randomStream('invoice');
        const first = await h.appendAmounts([s], 3);
        const c = h.consumer();
        await c.start();
        await c.whenCaughtUp();
        await h.store.consumers.pause(h.name, { by: 'test' });
        await until(() => c.status().state === 'paused', { message: 'runtime paused' });
        assert.equal(c.status().phase, 'paused');
        assert.equal(c.status().pause?.reason, 'operator');
        assert.equal(c.metrics().paused, true);
        const more = await h.appendAmounts([s], 2);
        const info = await h.store.consumers.get(h.name);
        assert.equal(info.status, 'paused');
        assert.equal(info.position, c.status().position, 'the cursor stays');
        await c.stop();
        assert.equal((await h.totals()).get(s), first.get(s), 'nothing new was handled while paused');
        // The pause is stored: a restarted consumer starts paused.
        await c.start();
        await until(() => c.status().state === 'paused', { message: 'paused after the restart' });
        await h.store.consumers.resume(h.name);
        await c.whenCaughtUp();
        assert.notEqual(c.status().state, 'paused');
        assert.equal(c.metrics().paused, false);
        assert.equal((await h.totals()).get(s), first.get(s)! + more.get(s)!);
      }));

    it('onError.redrive retries a dead-lettered entity by itself until it succeeds, in order', () =>
      withHarness(make, async (h) => {
        const bad = randomStream('invoice');
        const good = randomStream('invoice');
        const expected = await h.appendAmounts([bad, good], 2);
        let failuresLeft = 2;
        const c = h.consumer({
          onError: { attempts: 1, then: 'dead-letter', redrive: { after: 100, factor: 1, max: 5 } },
          handle: async (e, ctx) => {
            if (e.stream === bad && failuresLeft > 0) {
              failuresLeft--;
              throw new Error('provider down');
            }
            await h.addAmount(e, ctx);
          },
        });
        await c.start();
        await until(async () => (await h.totals()).get(bad) === expected.get(bad), {
          message: 'the bad entity handled after its redrives',
        });
        assert.equal((await h.totals()).get(good), expected.get(good));
        await until(async () => (await h.store.deadLetters.list(h.name)).length === 0, {
          message: 'the dead letters resolved',
        });
        const all = await h.store.deadLetters.list(h.name, { all: true });
        assert.ok(all.every((l) => l.status === 'resolved'));
        assert.equal(all[0]!.redrives, 2, 'redriven twice: failed once more, then succeeded');
      }));

    it('refuses a redrive without dead letters, and one outside its bounds', () =>
      withHarness(make, async (h) => {
        assert.throws(() => h.consumer({ onError: { redrive: { after: '5m' } } }), {
          code: 'invalid_input',
          message: /onError\.redrive/,
        });
        for (const redrive of [
          { after: '10ms' },
          { after: '5m', factor: 0.5 },
          { after: '5m', max: 1000 },
          { after: 'soon' },
        ]) {
          assert.throws(() => h.consumer({ onError: { then: 'dead-letter', redrive } }), {
            code: 'invalid_input',
          });
        }
      }));
  });
}
