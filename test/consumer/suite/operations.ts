import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { randomStream } from '../../support/names.js';
import { until } from '../../support/until.js';
import { withHarness } from '../support/harness.js';
import type { MakeTargetFixture } from '../support/targetFixture.js';

/** What operators do to a running consumer: pause and resume. */
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
  });
}
