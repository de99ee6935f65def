import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { createJetStreamRelay } from '../../src/nats/index.js';
import { NATS_URL } from '../../test/support/services.js';
import type { Scenario } from '../types.js';
import { runConsumerKills } from './consumerKill.js';

/**
 * The consumer-kill scenario with the consumer reading a JetStream durable instead of the store: a
 * relay (in the scenario's process) publishes the store into a stream, and each consumer life is a
 * child on `jetStreamSource`, SIGKILLed in its handler, between its target commit and its acks, right
 * after sending them, or at a random moment. The target must hold every event exactly once, in order.
 */
export const jetstreamConsumerKillScenario: Scenario = {
  name: 'jetstream-consumer-sigkill',
  proves:
    'a consumer on jetStreamSource SIGKILLed in its handler, between commit and acks, and during the acks loses and doubles nothing (SQLite store, relay, JetStream, SQLite target)',
  nats: true,
  run: (ctx) =>
    runConsumerKills(
      ctx,
      'sqlite',
      { events: ctx.size === 'full' ? 20_000 : 2_000, kills: ctx.size === 'full' ? 20 : 6 },
      async (setup) => {
        const stream = `IDEM_FAULTS_${ctx.random.int(0, 999_999_999)}`;
        const nc = await connect({ servers: NATS_URL });
        const jsm = await jetstreamManager(nc);
        const relay = createJetStreamRelay({ store: setup.store, connection: nc, stream, create: true });
        await relay.start();
        return {
          childConfig: { jetstream: { nats: NATS_URL, stream, durable: 'billing_faults' } },
          caughtUp: () => relay.whenCaughtUp(),
          close: async () => {
            await relay.stop();
            await jsm.streams.delete(stream).catch(() => undefined);
            await nc.close();
          },
        };
      },
    ),
};
