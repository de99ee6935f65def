import { openPostgresStore, type PostgresEventStore } from '../../postgres/index.js';
import { baselineRow, inRounds, row, timed, type Timed } from '../measure.js';
import { loadPgModule } from '../resources.js';
import type { Scenario } from '../types.js';
import { populate, streamOf } from '../workload.js';
import { rawPostgres } from './delivery.js';

const NAME = 'postgres-read';
/** Events per stream: what one `readStream` call returns. */
const PER_STREAM = 100;
const TARGET = 150_000;

/** Every stream read with `readStream`, one after another; checks that `n` events came back. */
async function storeStreams(store: PostgresEventStore, streams: number, n: number): Promise<Timed> {
  let count = 0;
  const t = await timed(n, async () => {
    for (let s = 0; s < streams; s++)
      for await (const e of store.readStream(streamOf(s))) count += e.version > 0 ? 1 : 0;
  });
  if (count !== n) throw new Error(`readStream returned ${count} of ${n} events`);
  return t;
}

/** The same streams read by a raw `pg` query each (json parsed by pg's JSON.parse, timestamps as Dates). */
async function rawStreams(url: string, streams: number, n: number): Promise<Timed> {
  const pg = await loadPgModule();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  let count = 0;
  try {
    const t = await timed(n, async () => {
      for (let s = 0; s < streams; s++) {
        const r = await client.query(
          'SELECT position, id, stream, version, type, data, metadata, recorded_at FROM idem.events WHERE stream = $1 ORDER BY version',
          [streamOf(s)],
        );
        count += r.rows.length;
      }
    });
    if (count !== n) throw new Error(`the raw reader read ${count} of ${n} events`);
    return t;
  } finally {
    await client.end();
  }
}

/** `readAll` from the start to the end; checks that `n` events came back. */
async function storeAll(store: PostgresEventStore, n: number): Promise<Timed> {
  let count = 0;
  const t = await timed(n, async () => {
    for await (const e of store.readAll()) count += e.position > 0 ? 1 : 0;
  });
  if (count !== n) throw new Error(`readAll returned ${count} of ${n} events`);
  return t;
}

/** Reads of the PostgreSQL store, `readStream` and `readAll`, against raw `pg` queries of the same rows. */
export const postgresRead: Scenario = {
  name: NAME,
  description: 'readStream of 100-event streams and readAll on the PostgreSQL store vs raw pg queries',
  needs: ['postgres'],
  async run(ctx) {
    const n = ctx.size(10_000, 100_000, PER_STREAM);
    const streams = n / PER_STREAM;
    const url = await ctx.postgresDatabase();
    const store = await openPostgresStore({ connectionString: url });
    try {
      ctx.log(`${NAME}: populating the store with ${streams} streams of ${PER_STREAM} events`);
      await populate(store, n, { perCall: PER_STREAM, ids: 'v7' });
      // The streams' events are read whole however many a round asks for: a round is every stream.
      const m = await inRounds(
        ctx.rounds,
        {
          rawStream: { events: n, run: () => rawStreams(url, streams, n) },
          stream: { events: n, run: () => storeStreams(store, streams, n) },
          rawAll: { events: n, run: () => rawPostgres(url, n, false) },
          all: { events: n, run: () => storeAll(store, n) },
        },
        { log: (message) => ctx.log(`${NAME}: ${message}`), warmUp: false },
      );
      const rawStream = baselineRow(
        NAME,
        `raw pg: one query per ${PER_STREAM}-event stream (pg parses the JSON)`,
        m.rawStream,
      );
      const rawAll = baselineRow(NAME, 'raw pg: pages of 500 by position (pg parses the JSON)', m.rawAll);
      const target = (t: Timed, raw: Timed): { text: string; met: boolean } => ({
        text: `>= ${TARGET.toLocaleString('en-US')} events/s and >= 0.8x raw`,
        met: t.eventsPerSec >= TARGET && t.eventsPerSec >= 0.8 * raw.eventsPerSec,
      });
      return [
        rawStream,
        rawAll,
        row({
          scenario: NAME,
          shape: `readStream of ${PER_STREAM}-event streams, one after another`,
          measured: m.stream,
          against: rawStream,
          target: target(m.stream, m.rawStream),
        }),
        row({
          scenario: NAME,
          shape: 'readAll from 0 (pages of 500)',
          measured: m.all,
          against: rawAll,
          target: target(m.all, m.rawAll),
        }),
      ];
    } finally {
      await store.close();
    }
  },
};
