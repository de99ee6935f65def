import { join } from 'node:path';
import type { RecordedEvent } from '../../core/event.js';
import { DEFAULT_CATCH_UP_BATCH } from '../../consumer/options.js';
import { createJetStreamRelay } from '../../nats/index.js';
import { loadNats } from '../../nats/loadNats.js';
import { eventBody, writeEventHeaders } from '../../nats/relayMessage.js';
import { openSqliteStore } from '../../sqlite/index.js';
import { baselineRow, inRounds, row, timed, type Timed } from '../measure.js';
import type { BenchRow, Scenario } from '../types.js';
import { populate } from '../workload.js';
import { endToEnd, rawAckAll, rawIntoSqlite, sourceIntoSqlite } from './jetstreamSource.js';

const NATS_URL = process.env.IDEM_NATS_URL ?? 'nats://127.0.0.1:4222';
const WINDOW = 256;
const NAME = 'jetstream';
const E2E_RATE = 1000;

/**
 * The relay beside raw `@nats-io/jetstream`: the same messages (the events of a SQLite store, with
 * the relay's headers and body) published with the same window of PubAcks in flight, each into a
 * stream of its own. The relay also reads the store and moves its cursor once per page. Then the
 * relay's stream is consumed by new durables, in interleaved rounds: raw without a target, raw into a
 * SQLite target by hand (the baseline), and by a billing consumer on `jetStreamSource` into SQLite;
 * and events appended at 1,000/s are timed from the append to their target commit through the relay
 * and the source.
 */
export const jetstream: Scenario = {
  name: NAME,
  description:
    'the JetStream relay and source beside raw JetStream publishes and consumption of the same messages; end-to-end latency through both',
  needs: [],
  async unavailable() {
    try {
      const nats = await loadNats();
      const nc = await nats.connect({ servers: NATS_URL, timeout: 2000 });
      await nc.close();
      return null;
    } catch (err) {
      return `NATS JetStream is not available at ${NATS_URL}: ${(err as Error).message}`;
    }
  },
  async run(ctx) {
    const n = ctx.size(2_000, 50_000, 1000);
    const dir = await ctx.tempDir();
    const store = await openSqliteStore({ path: join(dir, 'store.db') });
    const nats = await loadNats();
    const nc = await nats.connect({ servers: NATS_URL });
    const jsm = await nats.jetstreamManager(nc);
    const streams: string[] = [];
    const fresh = async (label: string): Promise<string> => {
      const name = `IDEM_BENCH_${label}_${Date.now()}`;
      streams.push(name);
      await jsm.streams.add({ name, subjects: [`${name}.>`] });
      return name;
    };
    try {
      await populate(store, n, { ids: 'v7' });
      const events: RecordedEvent[] = [];
      for await (const e of store.readAll()) events.push(e);

      const js = nats.jetstream(nc);
      const rawStream = await fresh('RAW');
      ctx.log(`raw: ${n} windowed publishes`);
      const raw = await timed(n, async () => {
        const inFlight: Promise<unknown>[] = [];
        for (const e of events) {
          if (inFlight.length >= WINDOW) await inFlight.shift();
          inFlight.push(
            js.publish(`${rawStream}.events`, eventBody(e), {
              msgID: e.id,
              headers: writeEventHeaders(nats.headers(), e),
            }),
          );
        }
        await Promise.all(inFlight);
      });

      const relayStream = await fresh('RELAY');
      ctx.log(`relay: ${n} events from the store`);
      const relay = createJetStreamRelay({ store, connection: nc, stream: relayStream, window: WINDOW });
      let relayed!: Timed;
      try {
        relayed = await timed(n, async () => {
          await relay.start();
          await relay.whenCaughtUp();
        });
      } finally {
        await relay.stop();
      }
      const published = relay.status().published;
      if (published !== n) throw new Error(`the relay published ${published} of ${n} events`);
      const rawRow = baselineRow(NAME, `raw @nats-io/jetstream publish, ${WINDOW} PubAcks in flight`, raw);
      const ratio = relayed.eventsPerSec / raw.eventsPerSec;
      const rows: BenchRow[] = [
        rawRow,
        row({
          scenario: NAME,
          shape: `idem relay (SQLite store), window ${WINDOW}, pages of 500`,
          measured: relayed,
          against: rawRow,
          target: { text: '>= 0.8x raw windowed publish', met: ratio >= 0.8 },
        }),
      ];

      // The relay's stream, consumed by new durables: raw without a target (the transport alone), raw
      // into a SQLite target by hand, and by an idem consumer on jetStreamSource; interleaved rounds.
      const bench = { nc, js, jsm, fresh };
      let runs = 0;
      const m = await inRounds(
        ctx.rounds,
        {
          transport: { events: n, run: () => rawAckAll(bench, relayStream, n, `raw_${++runs}`) },
          raw: { events: n, run: () => rawIntoSqlite(ctx, bench, relayStream, n, `raw_sqlite_${++runs}`) },
          source: { events: n, run: () => sourceIntoSqlite(ctx, bench, relayStream, n, `idem_${++runs}`) },
        },
        { log: (message) => ctx.log(`${NAME}: consumption of ${n} messages: ${message}`), warmUp: false },
      );
      const consumeBase = baselineRow(
        NAME,
        `raw @nats-io/jetstream consumer into SQLite (FULL): ack-all after each transaction of ${DEFAULT_CATCH_UP_BATCH.toLocaleString('en-US')} (ledger check, billing upsert, ledger insert, checkpoint)`,
        m.raw,
      );
      rows.push(
        baselineRow(
          NAME,
          'raw @nats-io/jetstream consume, ack-all every 500, no target (the transport alone)',
          m.transport,
        ),
        consumeBase,
        row({
          scenario: NAME,
          shape:
            'consumer on jetStreamSource -> SQLite target (FULL), billing handler, event-id + entity-version',
          measured: m.source,
          against: consumeBase,
          target: {
            text: '>= 0.7x raw ack-all consumption into the same target',
            met: m.source.eventsPerSec / m.raw.eventsPerSec >= 0.7,
          },
        }),
      );

      const total = ctx.size(2_000, 10_000);
      ctx.log(`end to end: ${total} events at ${E2E_RATE}/s, append -> relay -> source -> target commit`);
      const e2e = await endToEnd(ctx, bench, NATS_URL, total, E2E_RATE);
      rows.push(
        row({
          scenario: NAME,
          shape: `append + relay process (SQLite, FULL) -> JetStream -> jetStreamSource -> SQLite target, ${E2E_RATE}/s`,
          measured: e2e.timed,
          target: { text: 'p99 < 20 ms', met: e2e.extra.p99Ms! < 20 },
          extra: e2e.extra,
        }),
      );
      return rows;
    } finally {
      for (const name of streams) await jsm.streams.delete(name).catch(() => undefined);
      await nc.close();
      await store.close();
    }
  },
};
