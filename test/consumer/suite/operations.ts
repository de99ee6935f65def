import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { randomStream } from '../../support/names.js';
import { until } from '../../support/until.js';
import { withHarness } from '../support/harness.js';
import type { MakeTargetFixture } from '../support/targetFixture.js';

/** What operators do to a running consumer (pause, resume), and what it does by itself (redrive, outages). */
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

    it('an outage (every entity failing) pauses the consumer, probes, resumes by itself, and parks nothing', () =>
      withHarness(make, async (h) => {
        const streams = Array.from({ length: 6 }, () => randomStream('invoice'));
        const expected = await h.appendAmounts(streams, 2);
        let down = true;
        let calls = 0;
        const c = h.consumer({
          onError: {
            attempts: 1,
            then: 'dead-letter',
            outage: { entities: 3, window: '1h', probeDelay: 20, maxProbeDelay: 100 },
          },
          handle: async (e, ctx) => {
            calls++;
            if (down) throw new Error('payment provider unreachable');
            await h.addAmount(e, ctx);
          },
        });
        await c.start();
        await until(() => c.status().state === 'paused', { message: 'paused by the outage' });
        assert.equal(c.status().pause?.reason, 'outage');
        assert.equal(c.status().pause?.by, null);
        assert.equal(c.metrics().paused, true);
        const stored = await until(async () => {
          const info = await h.store.consumers.get(h.name);
          return info.pause?.reason === 'outage' ? info : null;
        });
        assert.equal(stored.status, 'paused');
        // Probes keep failing while the provider is down.
        const before = calls;
        await until(() => calls >= before + 2, { message: 'two more probes' });
        assert.equal(c.status().state, 'paused');
        assert.equal((await h.store.deadLetters.list(h.name, { all: true })).length, 0, 'nothing parked');
        down = false;
        await c.whenCaughtUp();
        assert.deepEqual(await h.totals(), expected);
        assert.notEqual(c.status().state, 'paused');
        assert.equal((await h.store.consumers.get(h.name)).pause, null);
        assert.equal(
          (await h.store.deadLetters.list(h.name, { all: true })).length,
          0,
          'nothing was ever parked',
        );
        assert.equal(c.metrics().deadLetters, 0);
      }));

    it('a poison event (one entity failing) is still dead-lettered; the others are handled', () =>
      withHarness(make, async (h) => {
        const poison = randomStream('invoice');
        const others = Array.from({ length: 5 }, () => randomStream('invoice'));
        const expected = await h.appendAmounts([poison, ...others], 3);
        const c = h.consumer({
          onError: {
            attempts: 1,
            then: 'dead-letter',
            outage: { entities: 2, window: '1h', probeDelay: 20 },
          },
          handle: async (e, ctx) => {
            if (e.stream === poison) throw new Error('bad invoice data');
            await h.addAmount(e, ctx);
          },
        });
        await c.start();
        await c.whenCaughtUp();
        const totals = await h.totals();
        for (const s of others) assert.equal(totals.get(s), expected.get(s));
        assert.equal(totals.get(poison), undefined);
        const letters = await h.store.deadLetters.list(h.name);
        assert.deepEqual(
          letters.map((l) => [l.event.stream, l.event.version]),
          [
            [poison, 1],
            [poison, 2],
            [poison, 3],
          ],
        );
        assert.notEqual(c.status().state, 'paused');
        assert.equal((await h.store.consumers.get(h.name)).pause, null);
      }));
  });
}
