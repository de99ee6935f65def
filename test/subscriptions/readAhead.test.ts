// Reading ahead (sources whose reads wait on I/O, as PostgreSQL's): the engine reads the next pages
// while the consumer holds delivered ones, within maxInFlight, and delivers every event once, in order.
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { describe, it } from 'node:test';
import type { RecordedEvent } from '../../src/core/event.js';
import type { EventFilter } from '../../src/core/filter.js';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { MemorySubscriptionState } from '../../src/memory/subscriptionState.js';
import type { SubscriptionSource } from '../../src/subscriptions/subscriptionSource.js';
import { SubscriptionService } from '../../src/subscriptions/subscriptionService.js';
import { until } from '../support/until.js';

/**
 * A memory store's log behind a source that reads ahead, answers each page after `latencyMs`, and
 * records the reads. At each read it also notes when the events read or being read beyond `acked`
 * (the test's acknowledged position, moved before each ack) would exceed `maxInFlight`.
 */
function slowSource(latencyMs: number, maxInFlight: number) {
  const store = createMemoryStore();
  const reads: { after: number; limit: number; got: number }[] = [];
  const ack = { position: 0 };
  const overReads: string[] = [];
  const source: SubscriptionSource = {
    readAhead: true,
    readAll: (o) => store.readAll(o),
    headPosition: () => store.headPosition(),
    onAppend: (listener) => store.onAppend(listener),
    async readPage(after: number, filter: EventFilter, limit: number): Promise<RecordedEvent[]> {
      const read = { after, limit, got: -1 };
      reads.push(read);
      // Every read so far: its events if answered, else all it may return; none is dropped in this test.
      const held = reads.reduce((n, r) => n + (r.got >= 0 ? r.got : r.limit), 0) - ack.position;
      if (held > maxInFlight)
        overReads.push(`read after ${after}: ${held} events beyond the ack at ${ack.position}`);
      await delay(latencyMs);
      const page: RecordedEvent[] = [];
      for await (const e of store.readAll({ after, filter, limit })) page.push(e);
      read.got = page.length;
      return page;
    },
  };
  return { store, source, reads, ack, overReads };
}

describe('subscription read-ahead (a source whose reads wait on I/O)', () => {
  it('reads the following pages while delivered events wait, never more than maxInFlight ahead of the cursor, and delivers each event once in order', async () => {
    const { store, source, reads, ack, overReads } = slowSource(2, 45);
    const service = new SubscriptionService(source, new MemorySubscriptionState());
    try {
      for (let i = 0; i < 20; i++) {
        await store.append(
          `s-${i % 3}`,
          Array.from({ length: 10 }, (_, j) => ({ type: 't', data: { i, j } })),
        );
      }
      const sub = await service.subscribe('reader_v1', { batchSize: 10, maxInFlight: 45 });
      const it = sub[Symbol.asyncIterator]();
      const first = await it.next();
      assert.ok(!first.done && first.value.kind === 'events');
      assert.deepEqual(
        first.value.events.map((e) => e.position),
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
      );
      // Holding the first page unacknowledged: the pages after it are read meanwhile, up to maxInFlight.
      await until(() => reads.filter((r) => r.got >= 0).length >= 4, { message: 'pages read ahead' });
      await delay(30);
      const fetched = reads.reduce((n, r) => n + Math.max(r.got, 0), 0);
      assert.deepEqual(
        reads.map((r) => r.after),
        [0, 10, 20, 30, 40].slice(0, reads.length),
        'each page read ahead follows on from the one before',
      );
      assert.ok(
        fetched <= 45,
        `read ${fetched} events with 10 delivered and unacknowledged (maxInFlight 45)`,
      );
      assert.ok(fetched >= 40, `read only ${fetched} events ahead`);

      const positions = first.value.events.map((e) => e.position);
      ack.position = 10;
      await sub.ack(10);
      while (positions.length < 200) {
        const m = await it.next();
        assert.ok(!m.done);
        if (m.value.kind !== 'events') continue;
        positions.push(...m.value.events.map((e) => e.position));
        ack.position = positions[positions.length - 1]!;
        await sub.ack(ack.position);
      }
      assert.deepEqual(
        positions,
        Array.from({ length: 200 }, (_, i) => i + 1),
      );
      assert.deepEqual(
        overReads,
        [],
        'never more than maxInFlight events read beyond the acknowledged position',
      );
      await sub.close();
    } finally {
      await service.close();
      await store.close();
    }
  });
});
