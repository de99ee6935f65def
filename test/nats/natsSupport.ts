import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { eventFromMessage } from '../../src/nats/relayMessage.js';
import type { RecordedEvent } from '../../src/core/event.js';
import { NATS_URL, randomSuffix } from '../support/index.js';

/** A NATS connection and JetStream manager for a test, and the streams it made, deleted by `close`. */
export interface NatsFixture {
  nc: NatsConnection;
  jsm: JetStreamManager;
  /** A fresh JetStream stream name (not created). */
  streamName(): string;
  /** Every message of the stream as the idem event it carries (null for a foreign message). */
  relayed(stream: string): Promise<(RecordedEvent | null)[]>;
  close(): Promise<void>;
}

export async function natsFixture(): Promise<NatsFixture> {
  const nc = await connect({ servers: NATS_URL });
  const jsm = await jetstreamManager(nc);
  const names: string[] = [];
  return {
    nc,
    jsm,
    streamName: () => {
      const name = `IDEM_TEST_${randomSuffix()}`;
      names.push(name);
      return name;
    },
    relayed: async (stream) => {
      const info = await jsm.streams.info(stream);
      const out: (RecordedEvent | null)[] = [];
      for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
        const m = await jsm.streams.getMessage(stream, { seq });
        if (m) out.push(eventFromMessage(m.header, m.data));
      }
      return out;
    },
    close: async () => {
      for (const name of names) await jsm.streams.delete(name).catch(() => undefined);
      await nc.close();
    },
  };
}
