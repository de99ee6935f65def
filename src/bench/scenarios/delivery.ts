import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { EventStore } from '../../core/eventStore.js';
import { openPostgresStore } from '../../postgres/index.js';
import { openSqliteStore } from '../../sqlite/index.js';
import { baselineRow, row, timed, type Timed } from '../measure.js';
import { loadPgModule } from '../resources.js';
import type { BenchRow, Scenario, ScenarioContext } from '../types.js';
import { populate } from '../workload.js';

/**
 * What the consumer scenarios stand on: how fast a durable subscription delivers the log to a
 * consumer, without the consumer. Not one of the scenarios with targets of their own; the targets shown are the
 * consumer targets, which a consumer can only reach if delivery alone is faster.
 */

const PAGE = 500;
const COLUMNS = 'position, id, stream, version, type, data, metadata, recorded_at';

/** `store.subscribe` from the start, acking each delivered page, until `n` events were delivered. */
async function subscribeAndAck(store: EventStore, consumer: string, n: number): Promise<Timed> {
  let delivered = 0;
  const t = await timed(n, async () => {
    const sub = await store.subscribe(consumer, { batchSize: PAGE });
    try {
      for await (const m of sub) {
        if (m.kind !== 'events') continue;
        delivered += m.events.length;
        await sub.ack(m.events[m.events.length - 1]!.position);
        if (delivered >= n) break;
      }
    } finally {
      await sub.close();
    }
  });
  if (delivered !== n) throw new Error(`the subscription delivered ${delivered} of ${n} events`);
  return t;
}

function rows(name: string, idem: Timed, read: Timed, readAck: Timed, target: number): BenchRow[] {
  const readRow = baselineRow(name, `raw pages of ${PAGE} + JSON.parse, no cursor`, read);
  const readAckRow = baselineRow(
    name,
    `raw pages of ${PAGE} + JSON.parse + cursor UPDATE committed per page`,
    readAck,
  );
  const shape = `store.subscribe + ack per page of ${PAGE}, no handler`;
  const text = `>= ${target.toLocaleString('en-US')} events/s (the consumer target)`;
  const met = idem.eventsPerSec >= target;
  return [
    readRow,
    readAckRow,
    row({
      scenario: name,
      shape: `${shape}, vs raw read`,
      measured: idem,
      against: readRow,
      target: { text, met },
    }),
    row({ scenario: name, shape: `${shape}, vs raw read + cursor`, measured: idem, against: readAckRow }),
  ];
}

/** The raw SQLite reader: pages by position, rows parsed, optionally a cursor row updated per page (synchronous=FULL). */
async function rawSqlite(path: string, n: number, withCursor: boolean): Promise<Timed> {
  const db = new Database(path);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.exec('CREATE TABLE IF NOT EXISTS bench_cursor (name TEXT PRIMARY KEY, position INTEGER NOT NULL)');
    db.prepare("INSERT OR REPLACE INTO bench_cursor VALUES ('raw', 0)").run();
    const page = db.prepare(
      `SELECT ${COLUMNS} FROM idem_events WHERE position > ? ORDER BY position LIMIT ?`,
    );
    const cursor = db.prepare("UPDATE bench_cursor SET position = ? WHERE name = 'raw'");
    let count = 0;
    const t = await timed(n, () => {
      let after = 0;
      while (count < n) {
        const rows = page.all(after, PAGE) as { position: number; data: string; metadata: string }[];
        if (rows.length === 0) break;
        for (const r of rows) {
          JSON.parse(r.data);
          JSON.parse(r.metadata);
        }
        count += rows.length;
        after = rows[rows.length - 1]!.position;
        if (withCursor) cursor.run(after);
      }
    });
    if (count !== n) throw new Error(`the raw reader read ${count} of ${n} events`);
    return t;
  } finally {
    db.close();
  }
}

/** The raw pg reader: pages by position (json parsed by pg), optionally a cursor row updated per page (autocommit). */
export async function rawPostgres(url: string, n: number, withCursor: boolean): Promise<Timed> {
  const pg = await loadPgModule();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(
      'CREATE TABLE IF NOT EXISTS bench_cursor (name text PRIMARY KEY, position bigint NOT NULL)',
    );
    await client.query(
      "INSERT INTO bench_cursor VALUES ('raw', 0) ON CONFLICT (name) DO UPDATE SET position = 0",
    );
    let count = 0;
    const t = await timed(n, async () => {
      let after = 0;
      while (count < n) {
        const r = await client.query<{ position: string }>(
          `SELECT ${COLUMNS} FROM idem.events WHERE position > $1 ORDER BY position LIMIT $2`,
          [after, PAGE],
        );
        if (r.rows.length === 0) break;
        count += r.rows.length;
        after = Number(r.rows[r.rows.length - 1]!.position);
        if (withCursor)
          await client.query("UPDATE bench_cursor SET position = $1 WHERE name = 'raw'", [after]);
      }
    });
    if (count !== n) throw new Error(`the raw reader read ${count} of ${n} events`);
    return t;
  } finally {
    await client.end();
  }
}

function size(ctx: ScenarioContext): number {
  return ctx.size(10_000, 100_000, PAGE);
}

export const deliverySqlite: Scenario = {
  name: 'delivery-sqlite',
  description:
    'a durable subscription on the SQLite store delivering the log from 0, ack per page, no handler',
  needs: [],
  async run(ctx) {
    const name = 'delivery-sqlite';
    const n = size(ctx);
    const path = join(await ctx.tempDir(), 'delivery.db');
    const store = await openSqliteStore({ path });
    try {
      ctx.log(`${name}: populating the store with ${n} events`);
      await populate(store, n);
      ctx.log(`${name}: baselines`);
      // better-sqlite3 blocks, so the raw readers run while the store is open but idle.
      const read = await rawSqlite(path, n, false);
      const readAck = await rawSqlite(path, n, true);
      ctx.log(`${name}: durable subscription`);
      const idem = await subscribeAndAck(store, 'delivery_v1', n);
      return rows(name, idem, read, readAck, 100_000);
    } finally {
      await store.close();
    }
  },
};

export const deliveryPostgres: Scenario = {
  name: 'delivery-postgres',
  description:
    'a durable subscription on the PostgreSQL store delivering the log from 0, ack per page, no handler',
  needs: ['postgres'],
  async run(ctx) {
    const name = 'delivery-postgres';
    const n = size(ctx);
    const url = await ctx.postgresDatabase();
    const store = await openPostgresStore({ connectionString: url });
    try {
      ctx.log(`${name}: populating the store with ${n} events`);
      await populate(store, n);
      ctx.log(`${name}: baselines`);
      const read = await rawPostgres(url, n, false);
      const readAck = await rawPostgres(url, n, true);
      ctx.log(`${name}: durable subscription`);
      const idem = await subscribeAndAck(store, 'delivery_v1', n);
      return rows(name, idem, read, readAck, 40_000);
    } finally {
      await store.close();
    }
  },
};
