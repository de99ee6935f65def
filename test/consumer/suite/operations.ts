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

    it('an outage whose failures arrive one live batch at a time parks nothing; it resumes by itself, each event once', () =>
      withHarness(make, async (h) => {
        const streams = Array.from({ length: 10 }, () => randomStream('invoice'));
        let down = true;
        let calls = 0;
        const failedFor = new Set<string>();
        const c = h.consumer({
          batch: { size: 1 },
          onError: {
            attempts: 2,
            then: 'dead-letter',
            // No hold runs out here: only the streak decides.
            outage: { entities: 4, window: '1h', hold: '1h', probeDelay: 20, maxProbeDelay: 100 },
          },
          handle: async (e, ctx) => {
            calls++;
            if (down) {
              failedFor.add(e.stream);
              throw new Error('payment provider unreachable');
            }
            await h.addAmount(e, ctx);
          },
        });
        await c.start();
        await c.whenCaughtUp();
        const expected = new Map<string, number>();
        const add = (m: Map<string, number>): void => {
          for (const [k, v] of m) expected.set(k, (expected.get(k) ?? 0) + v);
        };
        // Live traffic: each event is its own batch, after the previous entity's failure, so the
        // streak spans batches; a held entity's next event waits behind it.
        for (const [i, s] of streams.slice(0, 4).entries()) {
          add(await h.appendAmounts([s], 1));
          await until(() => failedFor.has(s), { message: `${s} to fail` });
          if (i < 3) add(await h.appendAmounts([streams[0]!], 1));
        }
        await until(() => c.status().state === 'paused', { message: 'paused by the outage' });
        assert.equal(c.status().pause?.reason, 'outage');
        assert.equal((await h.store.deadLetters.list(h.name, { all: true })).length, 0, 'nothing parked');
        // The traffic goes on during the outage; the probes keep failing.
        add(await h.appendAmounts(streams, 2));
        const before = calls;
        await until(() => calls >= before + 3, { message: 'three more probes' });
        assert.equal(c.status().state, 'paused');
        assert.equal((await h.store.deadLetters.list(h.name, { all: true })).length, 0, 'nothing parked');
        down = false;
        await c.whenCaughtUp();
        const totals = await h.fx.totals(h.table);
        assert.deepEqual(new Map([...totals].map(([s, t]) => [s, t.total])), expected);
        // Each event handled once: 2 per stream, 1 for each of the first four, 3 more for the first.
        const events = new Map([...totals].map(([s, t]) => [s, t.events]));
        assert.deepEqual(
          streams.map((s) => events.get(s)),
          [6, 3, 3, 3, 2, 2, 2, 2, 2, 2],
        );
        assert.notEqual(c.status().state, 'paused');
        assert.equal((await h.store.consumers.get(h.name)).pause, null);
        assert.equal(
          (await h.store.deadLetters.list(h.name, { all: true })).length,
          0,
          'nothing ever parked',
        );
        assert.equal(c.metrics().deadLetters, 0);
      }));

    it('failures that stop before they make an outage park nothing: a held failure gets a last attempt once another entity is handled', () =>
      withHarness(make, async (h) => {
        const [a, b, ok] = [randomStream('invoice'), randomStream('invoice'), randomStream('invoice')];
        let down = true;
        const calls = new Map<string, number>();
        const c = h.consumer({
          batch: { size: 1 },
          onError: {
            attempts: 2,
            then: 'dead-letter',
            outage: { entities: 5, window: '1h', hold: '1h', probeDelay: 20 },
          },
          handle: async (e, ctx) => {
            calls.set(e.stream, (calls.get(e.stream) ?? 0) + 1);
            if (down) throw new Error('payment provider unreachable');
            await h.addAmount(e, ctx);
          },
        });
        await c.start();
        await c.whenCaughtUp();
        const expected = new Map<string, number>();
        for (const s of [a, b]) {
          for (const [k, v] of await h.appendAmounts([s], 1)) expected.set(k, v);
          await until(() => calls.get(s) === 2, { message: `${s} to fail twice` });
        }
        assert.equal((await h.store.deadLetters.list(h.name, { all: true })).length, 0, 'held, not parked');
        // The provider is back: the next entity's event is handled, and the held ones are tried once more.
        down = false;
        for (const [k, v] of await h.appendAmounts([ok], 1)) expected.set(k, v);
        await c.whenCaughtUp();
        assert.deepEqual(await h.totals(), expected);
        assert.deepEqual(
          [a, b, ok].map((s) => calls.get(s)),
          [3, 3, 1],
        );
        assert.equal(
          (await h.store.deadLetters.list(h.name, { all: true })).length,
          0,
          'nothing ever parked',
        );
        assert.notEqual(c.status().state, 'paused');
      }));

    it('a lone poison event with no other traffic is dead-lettered once the hold (1 s by default) runs out, not after the window', () =>
      withHarness(make, async (h) => {
        const poison = randomStream('invoice');
        let calls = 0;
        const c = h.consumer({
          onError: { attempts: 2, then: 'dead-letter', outage: { window: '1h' } },
          handle: () => {
            calls++;
            throw new Error('bad invoice data');
          },
        });
        await c.start();
        await c.whenCaughtUp();
        await h.appendAmounts([poison], 2);
        await c.whenCaughtUp();
        const letters = await h.store.deadLetters.list(h.name);
        assert.deepEqual(
          letters.map((l) => [l.event.stream, l.event.version]),
          [
            [poison, 1],
            [poison, 2],
          ],
        );
        assert.equal(letters[0]!.error?.message, 'bad invoice data');
        assert.equal(calls, 2, 'its two attempts, no more');
        assert.equal(c.metrics().deadLetters, 1);
        assert.notEqual(c.status().state, 'paused');
        assert.equal((await h.store.consumers.get(h.name)).position, await h.store.headPosition());
      }));

    it('a poison entity among entities that are handled is dead-lettered as soon as another entity is handled', () =>
      withHarness(make, async (h) => {
        const poison = randomStream('invoice');
        const others = Array.from({ length: 3 }, () => randomStream('invoice'));
        let poisonCalls = 0;
        const c = h.consumer({
          batch: { size: 1 },
          onError: {
            attempts: 1,
            then: 'dead-letter',
            // Neither the hold nor the window runs out here: the handled entity tells it is poison.
            outage: { entities: 2, window: '1h', hold: '1h', probeDelay: 20 },
          },
          handle: async (e, ctx) => {
            if (e.stream === poison) {
              poisonCalls++;
              throw new Error('bad invoice data');
            }
            await h.addAmount(e, ctx);
          },
        });
        await c.start();
        await c.whenCaughtUp();
        await h.appendAmounts([poison], 2);
        await until(() => poisonCalls >= 1, { message: 'the poison event to fail' });
        assert.equal((await h.store.deadLetters.list(h.name, { all: true })).length, 0, 'held');
        const expected = new Map<string, number>();
        for (const s of others) for (const [k, v] of await h.appendAmounts([s], 1)) expected.set(k, v);
        await c.whenCaughtUp();
        const letters = await h.store.deadLetters.list(h.name);
        assert.deepEqual(
          letters.map((l) => [l.event.stream, l.event.version]),
          [
            [poison, 1],
            [poison, 2],
          ],
        );
        assert.equal(poisonCalls, 1, 'its one attempt, no more');
        const totals = await h.totals();
        for (const s of others) assert.equal(totals.get(s), expected.get(s));
        assert.equal(totals.get(poison), undefined);
        assert.notEqual(c.status().state, 'paused');
      }));

    it('a restart while failures are held loses nothing: the cursor never passed them, they are delivered again', () =>
      withHarness(make, async (h) => {
        const failing = Array.from({ length: 3 }, () => randomStream('invoice'));
        const ok = randomStream('invoice');
        const failedFor = new Set<string>();
        const options = {
          batch: { size: 1 },
          onError: {
            attempts: 1,
            then: 'dead-letter' as const,
            outage: { entities: 10, window: '1h', hold: '1h', probeDelay: 20 },
          },
        };
        const c = h.consumer({
          ...options,
          handle: async (e, ctx) => {
            if (e.stream === ok) return h.addAmount(e, ctx);
            failedFor.add(e.stream);
            throw new Error('payment provider unreachable');
          },
        });
        await c.start();
        const expected = await h.appendAmounts([ok], 1);
        await c.whenCaughtUp();
        await c.stop();
        const first = await h.store.headPosition();
        for (const [k, v] of await h.appendAmounts(failing, 2)) expected.set(k, v);
        await c.start();
        await until(() => failing.every((s) => failedFor.has(s)), { message: 'every entity to fail' });
        await c.stop();
        assert.equal((await h.store.deadLetters.list(h.name, { all: true })).length, 0, 'held, not parked');
        assert.equal((await h.store.consumers.get(h.name)).position, first, 'the cursor stays before them');
        assert.equal((await h.fx.target.readCheckpoint(h.name)).position, first, 'so does the checkpoint');
        // Another process (here another consumer) takes over with the provider back.
        const again = h.consumer(options);
        await again.start();
        await again.whenCaughtUp();
        assert.deepEqual(await h.totals(), expected);
        assert.equal(
          (await h.store.deadLetters.list(h.name, { all: true })).length,
          0,
          'nothing ever parked',
        );
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
