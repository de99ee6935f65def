// Remote consumers report their handler-side monitors over the WebSocket (`report` frames), so the
// server's /metrics shows them beside the in-process ones: a real server on a SQLite store, a remote
// consumer over HTTP and WebSocket, and raw frames for the bounds.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Counter, Registry } from 'prom-client';
import { connect } from '../../src/client/index.js';
import { createConsumer } from '../../src/consumer/index.js';
import { LATENCY_BUCKETS, type ConsumerMonitors } from '../../src/core/consumerMonitors.js';
import { openSqliteStore, sqliteTarget, type SqliteEventStore } from '../../src/sqlite/index.js';
import { startServer, type RunningServer } from '../../src/server/index.js';
import { randomConsumer, randomStream, tempDir, until, type TempDir } from '../support/index.js';
import { WsPeer } from './wsPeer.js';

function monitors(delivered: number): ConsumerMonitors {
  const latency = { count: 0, sum: 0, max: 0, buckets: LATENCY_BUCKETS.map(() => 0) };
  return {
    delivered,
    processed: 0,
    duplicates: 0,
    gaps: 0,
    recovered: 0,
    deadLetters: 0,
    parked: 0,
    reconnects: 0,
    batches: 0,
    parkedEntities: 0,
    handlerSeconds: latency,
    endToEndSeconds: latency,
    checkpointLag: { events: 0, seconds: 0 },
  };
}

describe('monitors reported by remote consumers', () => {
  let dir: TempDir;
  let store: SqliteEventStore;
  let server: RunningServer;
  const registry = new Registry();

  before(async () => {
    dir = tempDir();
    store = await openSqliteStore({ path: dir.file('events.db') });
    // An in-process consumer's family: the reported series join it under one header.
    new Counter({
      name: 'idem_consumer_delivered_total',
      help: 'Events delivered to the consumer, duplicates included',
      labelNames: ['consumer'],
      registers: [registry],
    }).inc({ consumer: 'in_process' }, 4);
    server = await startServer({ store, port: 0, metricsRegistries: [registry] });
  });

  after(async () => {
    await server.close();
    await store.close();
    await dir.cleanup();
  });

  const scrape = async (): Promise<string> => (await fetch(`${server.url}/metrics`)).text();

  it('shows repeat rate, gaps, latencies, reconnects and checkpoint lag of a remote consumer on /metrics', async () => {
    const remote = connect(server.url);
    const target = sqliteTarget(dir.file('target.db'));
    const name = randomConsumer('remote');
    const stream = randomStream('order');
    await remote.append(
      stream,
      [1, 2, 3, 4, 5].map((n) => ({ type: 'order.placed', data: { n } })),
    );
    const consumer = createConsumer({ name, source: remote, target, handle: () => undefined });
    try {
      await consumer.start();
      await consumer.whenCaughtUp();
      const series = (family: string) => new RegExp(`^${family}\\{consumer="${name}"\\} (\\S+)$`, 'm');
      await until(async () => series('idem_consumer_processed_total').exec(await scrape())?.[1] === '5', {
        timeoutMs: 15_000,
        message: 'the processed count reaches /metrics',
      });
      // Delivered again from position 0: every event is a duplicate the ledger catches.
      await consumer.stop();
      await store.consumers.reset(name, 0);
      await consumer.start();
      await consumer.whenCaughtUp();
      await until(async () => series('idem_consumer_duplicates_total').exec(await scrape())?.[1] === '5', {
        timeoutMs: 15_000,
        message: 'the duplicates reach /metrics',
      });
      const text = await scrape();
      assert.equal(series('idem_consumer_delivered_total').exec(text)?.[1], '10');
      assert.equal(series('idem_consumer_gaps_total').exec(text)?.[1], '0');
      assert.equal(series('idem_consumer_reconnects_total').exec(text)?.[1], '0');
      assert.equal(series('idem_consumer_checkpoint_lag_events').exec(text)?.[1], '0');
      assert.match(text, new RegExp(`^idem_consumer_handler_seconds_count\\{consumer="${name}"\\} 5$`, 'm'));
      assert.match(
        text,
        new RegExp(`^idem_consumer_end_to_end_seconds_bucket\\{le="\\+Inf",consumer="${name}"\\} 5$`, 'm'),
      );
      // One family, one header: the in-process series and the reported one side by side.
      assert.equal(text.match(/^# TYPE idem_consumer_delivered_total counter$/gm)?.length, 1);
      assert.match(text, /^idem_consumer_delivered_total\{consumer="in_process"\} 4$/m);

      const json = (await (await fetch(`${server.url}/v1/consumers/${name}/monitors`)).json()) as {
        repeatRate: number;
        monitors: ConsumerMonitors;
      };
      assert.equal(json.repeatRate, 0.5);
      assert.equal(json.monitors.duplicates, 5);
    } finally {
      await consumer.stop();
      await remote.close();
      await target.close();
    }
  });

  it('takes reports only from the owner of a subscription, one a second, each field bounded', async () => {
    const peer = await WsPeer.open(server.url);
    const name = randomConsumer('raw');
    try {
      peer.send({ type: 'report', sub: 'r1', monitors: monitors(1) });
      const early = await peer.waitFor((m) => m.type === 'error', 'a report before subscribing');
      assert.equal((early.error as { details: { field: string } }).details.field, 'sub');

      peer.send({ type: 'subscribe', sub: 'r1', consumer: name, req: 1 });
      await peer.waitFor((m) => m.type === 'subscribed', 'subscribed');
      peer.send({ type: 'report', sub: 'r1', monitors: monitors(7) });
      peer.send({ type: 'report', sub: 'r1', monitors: monitors(8) });
      const bad = monitors(9);
      bad.handlerSeconds = { ...bad.handlerSeconds, buckets: [1, 2] };
      const before = peer.messages.length;
      peer.send({ type: 'report', sub: 'r1', monitors: bad });
      const refused = await peer.waitFor((m) => m.type === 'error', 'a refused report', before);
      assert.equal(
        (refused.error as { details: { field: string } }).details.field,
        'monitors.handlerSeconds.buckets',
      );
      // A ping after the reports: once answered, the server has read them all.
      peer.send({ type: 'ping', req: 'p' });
      await peer.waitFor((m) => m.type === 'pong', 'pong');
      assert.match(
        await scrape(),
        new RegExp(`^idem_consumer_delivered_total\\{consumer="${name}"\\} 7$`, 'm'),
      );
    } finally {
      await peer.close();
    }
  });
});
