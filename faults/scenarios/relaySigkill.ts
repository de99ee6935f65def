import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { eventFromMessage } from '../../src/nats/relayMessage.js';
import type { RelayChildConfig } from '../children/relayChild.js';
import { Child, ScriptRunner, delay, until } from '../processes.js';
import { openSetup, readEvents, type Backend } from '../stores.js';
import { NATS_URL } from '../../test/support/services.js';
import { emptyBody, type Scenario } from '../types.js';

/**
 * `idem/nats`'s relay SIGKILLed again and again while events are appended, into a JetStream stream
 * whose duplicate window (1 s) is shorter than the pauses between the relay's lives: JetStream alone
 * would store again what a killed relay published but had not acknowledged to the store. Counts the
 * stream's messages against the store's events: lost, doubled, out of position order.
 */
export function relaySigkillScenario(backend: Backend): Scenario {
  return {
    name: `relay-sigkill-${backend}`,
    proves: `a relay SIGKILLed while events are appended (${backend}) leaves every event in JetStream exactly once, in position order, whatever the duplicate window`,
    postgres: backend === 'postgres',
    nats: true,
    async run(ctx) {
      const body = emptyBody();
      const kills = ctx.size === 'full' ? 20 : 4;
      const total = ctx.size === 'full' ? 20_000 : 2_000;
      const streams = 500;
      const setup = await openSetup(backend, ctx.dir);
      const nc = await connect({ servers: NATS_URL });
      const jsm = await jetstreamManager(nc);
      const stream = `IDEM_FAULTS_${ctx.random.int(0, 999_999_999)}`;
      const runner = new ScriptRunner(ctx.dir);
      let child: Child | null = null;
      try {
        await jsm.streams.add({ name: stream, subjects: [`${stream}.>`], duplicate_window: 1_000_000_000 });
        const config: RelayChildConfig = {
          store: setup.storeConfig as RelayChildConfig['store'],
          nats: NATS_URL,
          stream,
          leaseTtlMs: 1000,
        };
        let appended = 0;
        const appendTo = async (count: number): Promise<void> => {
          const goal = Math.min(total, appended + count);
          for (; appended < goal; appended++)
            await setup.store.append(`order-${ctx.random.int(0, streams - 1)}`, [
              { type: 'order.placed', data: { n: appended } },
            ]);
        };
        await appendTo(total / (kills + 2));
        const published = async (): Promise<number> => (await jsm.streams.info(stream)).state.messages;
        for (let life = 0; life < kills; life++) {
          child = new Child([...runner.command('relay'), JSON.stringify(config)]);
          await child.waitForLine((l) => l === 'running', 30_000, 'the relay to start');
          const before = await published();
          const appending = appendTo(total / (kills + 2));
          // Kill at a random moment after this life published something.
          await until(async () => (await published()) > before, 30_000, `life ${life} to publish`);
          await delay(ctx.random.int(0, 50));
          await child.kill();
          body.faultCount++;
          await appending;
          await delay(1200); // longer than the duplicate window
        }
        await appendTo(total);
        child = new Child([...runner.command('relay'), JSON.stringify(config)]);
        await child.waitForLine((l) => l === 'running', 30_000, 'the last relay to start');
        await until(async () => (await published()) >= appended, 120_000, 'the last relay to catch up');
        await child.kill();
        child = null;

        const events = await readEvents(setup.store);
        const info = await jsm.streams.info(stream);
        const seen = new Map<string, number>();
        let lastPosition = 0;
        for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
          const m = await jsm.streams.getMessage(stream, { seq });
          const e = m ? eventFromMessage(m.header, m.data) : null;
          if (!e) continue;
          seen.set(e.id, (seen.get(e.id) ?? 0) + 1);
          if (e.position <= lastPosition) body.outOfOrder++;
          lastPosition = e.position;
        }
        for (const e of events) {
          const n = seen.get(e.id) ?? 0;
          if (n === 0) body.lost++;
          if (n > 1) body.doubled += n - 1;
        }
        body.events = events.length;
        body.delivered = info.state.messages;
        body.faults = `${body.faultCount} relay SIGKILL, 1.2 s pauses > 1 s duplicate window`;
        body.notes.push(`${info.state.messages} JetStream messages for ${events.length} events`);
        return body;
      } finally {
        await child?.kill();
        await jsm.streams.delete(stream).catch(() => undefined);
        await nc.close();
        await setup.close();
      }
    },
  };
}
