import { join } from 'node:path';
import { createConsumer } from '../../src/consumer/consumer.js';
import { createJetStreamRelay, jetStreamSource } from '../../src/nats/index.js';
import { sqliteTarget } from '../../src/sqlite/target.js';
import { NATS_SERVER, OwnNatsServer } from '../natsServer.js';
import { createSqliteOutput, sqliteRecorder } from '../output.js';
import { delay, until } from '../processes.js';
import { openSetup } from '../stores.js';
import { emptyBody, type Scenario } from '../types.js';

const CONSUMER = 'orders_nats_restart_v1';

/**
 * A nats-server of the scenario's own (JetStream on disk) stopped and started again, several times,
 * while events are appended to a SQLite store, relayed into JetStream and consumed from it by a
 * consumer on `jetStreamSource` into a SQLite target. Afterwards the target must hold every event of
 * the store exactly once, each entity in version order.
 */
export const natsRestartScenario: Scenario = {
  name: 'nats-restart',
  proves: `nats-server (${NATS_SERVER}) restarted under load loses, doubles and reorders nothing between the store, the relay, JetStream and a consumer's target`,
  nats: true,
  async run(ctx) {
    const body = emptyBody();
    const full = ctx.size === 'full';
    const total = full ? 20_000 : 3_000;
    const restarts = full ? 6 : 2;
    const setup = await openSetup('sqlite', ctx.dir);
    const server = await OwnNatsServer.start(join(ctx.dir, 'nats'));
    const stream = 'IDEM_RESTART';
    const relay = createJetStreamRelay({
      store: setup.store,
      servers: server.url,
      stream,
      create: true,
    });
    const source = jetStreamSource({
      servers: server.url,
      stream,
      durable: 'orders',
      recoverFrom: setup.store,
      ackWaitMs: 2000,
    });
    const targetPath = (setup.targetConfig as { path: string }).path;
    const target = sqliteTarget(targetPath, { durability: 'normal' });
    createSqliteOutput(target.db);
    const record = sqliteRecorder(target.db, CONSUMER);
    const consumer = createConsumer({
      name: CONSUMER,
      source,
      target,
      batch: { size: 100 },
      reconnect: { initialDelayMs: 50, maxDelayMs: 1000 },
      handle: (e) => record(e),
    });
    try {
      await relay.start();
      await consumer.start();
      let appended = 0;
      // Paced, so that the restarts land amid the load: about 1,000 events a second.
      const started = Date.now();
      const appending = (async () => {
        while (appended < total) {
          if (appended > Date.now() - started) await delay(5);
          const n = Math.min(total - appended, ctx.random.int(1, 5));
          await setup.store.append(
            `order-${ctx.random.int(1, 100)}`,
            Array.from({ length: n }, (_, i) => ({ type: 'order.line_added', data: { n: appended + i } })),
          );
          appended += n;
        }
      })();
      for (let r = 1; r <= restarts; r++) {
        const at = Math.floor((r * total) / (restarts + 1));
        await until(() => appended >= at, 120_000, `${at} appends`);
        await server.stop('SIGTERM');
        await delay(ctx.random.int(100, 800));
        await server.start();
        body.faultCount++;
        ctx.log(`restart ${r}: ${appended} appended, consumer at ${consumer.metrics().position}`);
      }
      await appending;
      const head = await setup.store.headPosition();
      const published = (): Promise<boolean> =>
        source.headPosition().then(
          (h) => h >= head,
          () => false,
        );
      await until(published, 120_000, 'the relay to publish everything');
      await consumer.whenCaughtUp({ timeoutMs: 120_000 });
      const m = consumer.metrics();
      const counts = await setup.count(CONSUMER, {});
      body.events = appended;
      body.delivered = m.delivered;
      body.duplicates = m.duplicates;
      body.lost = counts.lost;
      body.doubled = counts.doubled;
      body.outOfOrder = counts.outOfOrder;
      body.faults = `${body.faultCount} nats-server restarts (SIGTERM, 0.1-0.8 s down)`;
      body.notes.push(
        `relay restarts ${relay.status().restarts}, consumer reconnects ${m.reconnects}, JetStream redelivered ${m.source?.redelivered ?? 0}, durable remade ${m.source?.remade ?? 0}`,
      );
      return body;
    } finally {
      await consumer.stop();
      await relay.stop();
      await source.close();
      await target.close();
      await server.stop();
      await setup.close();
    }
  },
};
