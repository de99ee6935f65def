// The bench's repeated measurements: warm-up, interleaved rounds, the median round; bad rounds refused.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { inRounds, row, type Timed } from '../../src/bench/measure.js';
import { runBench } from '../../src/bench/runBench.js';

/** A fake measurement: records the call and returns the next of `rates` (events/s). */
function fake(
  name: string,
  rates: number[],
  calls: string[],
): { events: number; run: (e: number) => Promise<Timed> } {
  let i = 0;
  return {
    events: 1000,
    run: (events) => {
      calls.push(`${name}:${events}`);
      const eventsPerSec = events === 1000 ? rates[i++]! : 1;
      return Promise.resolve({ events, seconds: events / eventsPerSec, eventsPerSec });
    },
  };
}

describe('bench: measurements in rounds', () => {
  it('warms every shape up on a tenth of its events, then measures them interleaved and keeps the median round', async () => {
    const calls: string[] = [];
    const m = await inRounds(3, { a: fake('a', [30, 10, 20], calls), b: fake('b', [5, 50, 7], calls) });
    assert.deepEqual(calls, ['a:100', 'b:100', 'a:1000', 'b:1000', 'a:1000', 'b:1000', 'a:1000', 'b:1000']);
    assert.deepEqual(
      [m.a.eventsPerSec, m.a.minEventsPerSec, m.a.maxEventsPerSec, m.a.rounds, m.a.seconds],
      [20, 10, 30, 3, 50],
    );
    assert.deepEqual([m.b.eventsPerSec, m.b.minEventsPerSec, m.b.maxEventsPerSec], [7, 5, 50]);
    // A row of a repeated measurement carries the range; one of a single round does not.
    assert.deepEqual(row({ scenario: 's', shape: 'a', measured: m.a }).extra, {
      rounds: 3,
      minEventsPerSec: 10,
      maxEventsPerSec: 30,
    });
    const once = await inRounds(1, { a: fake('a', [42], []) });
    assert.deepEqual(row({ scenario: 's', shape: 'a', measured: once.a }).extra, {});
  });

  it('one round has no warm-up; an even number of rounds keeps the slower middle round', async () => {
    const calls: string[] = [];
    await inRounds(1, { a: fake('a', [1], calls) });
    assert.deepEqual(calls, ['a:1000']);
    const m = await inRounds(2, { a: fake('a', [40, 20], []) });
    assert.equal(m.a.eventsPerSec, 20);
  });

  it('runBench refuses a bad rounds value, naming it', async () => {
    for (const bad of [0, 2.5, 21, Number.NaN]) {
      await assert.rejects(runBench({ rounds: bad, only: ['sqlite-append'] }), {
        code: 'invalid_input',
        message: /rounds/,
      });
    }
  });
});
