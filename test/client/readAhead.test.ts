// The remote subscription asks for the next message right behind an ack of everything delivered (one
// WebSocket round trip less per batch), and only then: after a partial ack a park may still come, so
// the next batch is read only when the iterator asks.
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { connect } from '../../src/client/connect.js';
import type { SubscriptionMessage } from '../../src/core/subscription.js';
import { startTestServer, type ServerFixture } from '../server/serverFixture.js';
import { until } from '../support/until.js';

async function eventsSent(fixture: ServerFixture): Promise<number> {
  return (await fixture.server.metrics.wsEventsSent.get()).values[0]?.value ?? 0;
}

/** The next message: the positions of an events message, or `caught_up`. */
async function next(it: AsyncIterator<SubscriptionMessage>): Promise<number[] | 'caught_up'> {
  const m = await it.next();
  assert.equal(m.done, false);
  const msg = m.value;
  return msg.kind === 'events' ? msg.events.map((e) => e.position) : 'caught_up';
}

describe('remote subscription: asking ahead after an ack', () => {
  it('after an ack of everything delivered the server sends the next batch before the iterator asks; after a partial ack it waits', async () => {
    const fixture = await startTestServer();
    const remote = connect(fixture.url);
    try {
      await fixture.store.append('s', [
        { type: 't', data: { i: 1 } },
        { type: 't', data: { i: 2 } },
      ]);
      const sub = await remote.subscribe('c_v1');
      const it = sub[Symbol.asyncIterator]();
      assert.deepEqual(await next(it), [1, 2]);
      // Partial ack: position 2 may still be parked, so nothing is asked for.
      await sub.ack(1);
      await fixture.store.append('s', [{ type: 't', data: { i: 3 } }]);
      await delay(300);
      assert.equal(
        await eventsSent(fixture),
        2,
        'nothing is sent after a partial ack until the iterator asks',
      );
      assert.deepEqual(await next(it), [3]);
      assert.equal(await next(it), 'caught_up');
      // Full ack: the next message is asked for behind it, so event 4 is sent without a next().
      await sub.ack(3);
      await fixture.store.append('s', [{ type: 't', data: { i: 4 } }]);
      await until(async () => (await eventsSent(fixture)) === 4, {
        message: 'event 4 sent after the full ack',
      });
      assert.deepEqual(await next(it), [4]);
      await sub.close();
    } finally {
      await remote.close();
      await fixture.cleanup();
    }
  });
});
