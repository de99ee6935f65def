// idem's PostgreSQL appends beside Emmett's and raw `pg` inserts, in one process against one
// PostgreSQL (docs/benchmarks.md, "Beside a peer"). Emmett is not a dependency of idem: install it
// in a folder of its own and name that folder (its peer dependencies clash with idem's):
//   npm install --prefix /tmp/peer @event-driven-io/emmett-postgresql@0.42.0
//   IDEM_PEER_DIR=/tmp/peer node --import tsx bench/peerAppend.ts [postgres-url] [events-per-round] [rounds]
// Each side writes into a database of its own (created here, dropped at the end); the shapes run
// `rounds` times after a warm-up, interleaved in a rotating order, and the medians are printed with
// each round's ratio to the raw inserts of the same round.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import pg from 'pg';
import { RawPostgresEvents } from '../src/bench/rawPostgres.js';
import { concurrently } from '../src/bench/measure.js';
import { loadPgModule } from '../src/bench/resources.js';
import { newEvent, rawRow, streamOf } from '../src/bench/workload.js';
import { openPostgresStore } from '../src/postgres/index.js';

interface EmmettStore {
  appendToStream(
    stream: string,
    events: { type: string; data: unknown; metadata?: unknown }[],
  ): Promise<unknown>;
  close(): Promise<void>;
}

const EMMETT = '@event-driven-io/emmett-postgresql';
const peerDir = process.env.IDEM_PEER_DIR ?? process.cwd();
const [url = 'postgres://postgres@127.0.0.1:5432/postgres', eventsArg = '1500', roundsArg = '7'] =
  process.argv.slice(2);
const perRound = Number(eventsArg);
const rounds = Number(roundsArg);
if (!Number.isInteger(perRound) || perRound < 100 || perRound > 1_000_000)
  throw new Error('events-per-round: must be an integer from 100 to 1,000,000');
if (!Number.isInteger(rounds) || rounds < 1 || rounds > 100)
  throw new Error('rounds: must be an integer from 1 to 100');

let emmettModule: { getPostgreSQLEventStore: (connectionString: string) => EmmettStore };
try {
  const resolved = createRequire(join(peerDir, 'package.json')).resolve(EMMETT);
  emmettModule = (await import(resolved)) as typeof emmettModule;
} catch {
  console.error(
    `${EMMETT} is not installed in ${peerDir}; install it in a folder of its own and name that folder:\n` +
      '  npm install --prefix /tmp/peer @event-driven-io/emmett-postgresql@0.42.0\n' +
      '  IDEM_PEER_DIR=/tmp/peer node --import tsx bench/peerAppend.ts',
  );
  process.exit(2);
}

const admin = new pg.Client({ connectionString: url });
await admin.connect();
const tag = `${process.pid}_${Date.now().toString(36)}`;
const databases = { raw: `peer_raw_${tag}`, idem: `peer_idem_${tag}`, emmett: `peer_emmett_${tag}` };
const urlOf = (database: string): string => {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.href;
};
for (const database of Object.values(databases)) await admin.query(`CREATE DATABASE ${database}`);

try {
  const raw = await RawPostgresEvents.open(await loadPgModule(), urlOf(databases.raw));
  const idem = await openPostgresStore({ connectionString: urlOf(databases.idem) });
  const emmett = emmettModule.getPostgreSQLEventStore(urlOf(databases.emmett));
  try {
    // Each side numbers its own events: every call goes to the next of 1,000 streams, as in
    // `idem bench`'s postgres-append; 100-event calls write 100 events to one stream.
    const next = { raw: 0, idem: 0, emmett: 0 };
    const take = (side: keyof typeof next, n: number): number[] =>
      Array.from({ length: n }, () => next[side]++);
    const shapes: Record<string, () => Promise<void>> = {
      'raw pg, 1 row per INSERT': async () => {
        for (const i of take('raw', perRound)) await raw.write([rawRow(i)]);
      },
      'idem, 1 event/call, sequential': async () => {
        for (const i of take('idem', perRound)) await idem.append(streamOf(i), [newEvent(i, 'v7')]);
      },
      'Emmett, 1 event/call, sequential': async () => {
        for (const i of take('emmett', perRound)) {
          const { type, data, metadata } = newEvent(i);
          await emmett.appendToStream(streamOf(i), [{ type, data, metadata }]);
        }
      },
      'idem, 1 event/call, 16 concurrent callers': async () => {
        const ids = take('idem', perRound);
        await concurrently(16, ids.length, async (c) => {
          const i = ids[c]!;
          await idem.append(streamOf(i), [newEvent(i, 'v7')]);
        });
      },
      'Emmett, 1 event/call, 16 concurrent callers': async () => {
        const ids = take('emmett', perRound);
        await concurrently(16, ids.length, async (c) => {
          const { type, data, metadata } = newEvent(ids[c]!);
          await emmett.appendToStream(streamOf(ids[c]!), [{ type, data, metadata }]);
        });
      },
    };
    const names = Object.keys(shapes);
    const rates = new Map<string, number[]>(names.map((n) => [n, []]));
    for (const name of names) await shapes[name]!(); // warm-up, not counted
    for (let r = 0; r < rounds; r++) {
      const order = [...names.slice(r % names.length), ...names.slice(0, r % names.length)];
      for (const name of order) {
        const start = process.hrtime.bigint();
        await shapes[name]!();
        const seconds = Number(process.hrtime.bigint() - start) / 1e9;
        rates.get(name)!.push(perRound / seconds);
      }
      console.error(`# round ${r + 1}/${rounds} done`);
    }
    const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
    const rawRates = rates.get(names[0]!)!;
    console.log(
      `${perRound} events per shape and round, ${rounds} rounds; events/s, median (lowest-highest)`,
    );
    for (const name of names) {
      const xs = rates.get(name)!;
      const vsRaw = xs.map((x, i) => x / rawRates[i]!);
      console.log(
        `${name.padEnd(45)} ${Math.round(median(xs)).toLocaleString('en-US').padStart(7)}` +
          ` (${Math.round(Math.min(...xs)).toLocaleString('en-US')}-${Math.round(Math.max(...xs)).toLocaleString('en-US')})` +
          (name === names[0] ? '' : `  vs raw per round: median ${median(vsRaw).toFixed(2)}x`),
      );
    }
    for (const shape of ['1 event/call, sequential', '1 event/call, 16 concurrent callers']) {
      const a = rates.get(`idem, ${shape}`)!;
      const b = rates.get(`Emmett, ${shape}`)!;
      const per = a.map((x, i) => x / b[i]!);
      console.log(
        `idem / Emmett, ${shape}: median ${median(per).toFixed(2)}x (${per.map((x) => x.toFixed(2)).join(', ')})`,
      );
    }
  } finally {
    await raw.close();
    await idem.close();
    await emmett.close();
  }
} finally {
  for (const database of Object.values(databases))
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.end();
}
