// What the shared tail's question per polling tick costs PostgreSQL when its resting subscriptions'
// streams exist (docs/benchmarks.md, "Idle subscriptions"): `store.firstStreamMatch` over the events
// appended since the subscriptions' position, for 100 stream prefixes, beside the one anchored
// regular expression of the same prefixes that it replaced (kept here as the yardstick):
//   node --import tsx bench/tailMatch.ts [postgres-url] [rounds]
// Creates a database, appends 200,000 events to 1,000 streams and one event to each prefix's stream,
// times each shape over 0, 200, 2,000 and 20,000 new events in interleaved rounds, prints the medians
// (ms per question), and drops the database.
import { openPostgresStore } from '../src/postgres/index.js';
import { BenchResources } from '../src/bench/resources.js';

const [url = 'postgres://postgres@127.0.0.1:5432/postgres', roundsArg = '3'] = process.argv.slice(2);
const rounds = Number(roundsArg);
const EVENTS = 200_000;
const prefixes = Array.from({ length: 100 }, (_, i) => `idle-${i}-`);

const resources = new BenchResources(url);
const dbUrl = await resources.postgresDatabase();
const store = await openPostgresStore({ connectionString: dbUrl });
try {
  for (const p of prefixes) await store.append(`${p}1`, [{ type: 'opened', data: null }]);
  for (let i = 0; i < EVENTS; i += 500) {
    await Promise.all(
      Array.from({ length: 5 }, (_, k) =>
        store.append(
          `invoice-${(i / 100 + k) % 1000}`,
          Array.from({ length: 100 }, (_, j) => ({ type: 'issued', data: { n: i + k * 100 + j } })),
        ),
      ),
    );
    if (i % 50_000 === 0) process.stderr.write(`# appended ${i} of ${EVENTS}\n`);
  }
  await store.pool.query('VACUUM ANALYZE idem.events');
  const head = prefixes.length + EVENTS;
  // The statement `firstStreamMatch` sent before: the prefixes escaped as regular-expression literals.
  const literal = (t: string): string => t.replace(/[^A-Za-z0-9\u0080-\u{10FFFF}]/gu, (c) => `\\${c}`);
  const regex = `^(?:${prefixes.map(literal).join('|')})`;
  const regexQuery = {
    name: 'tail_match_regex',
    text: `SELECT h.position, (
        SELECT min(e.position) FROM idem.events e
         WHERE e.position > $1 AND e.position <= h.position AND e.stream ~ $2)
      FROM (SELECT position FROM idem.head WHERE id LIMIT 1) h`,
  };
  const shapes: Record<string, (after: number) => Promise<unknown>> = {
    'store.firstStreamMatch': (after) => store.firstStreamMatch(after, prefixes, []),
    'one regular expression': (after) => store.pool.query({ ...regexQuery, values: [after, regex] }),
  };
  const times = new Map<string, number[]>();
  for (let round = 0; round < rounds; round++) {
    for (const fresh of [0, 200, 2_000, 20_000]) {
      for (const [shape, ask] of Object.entries(shapes)) {
        const asks = Math.max(5, Math.min(100, Math.floor(200_000 / Math.max(fresh, 1))));
        // Both statements planned (named, five custom plans) before the clock starts.
        for (let i = 0; i < 6; i++) await ask(head - fresh);
        const t0 = process.hrtime.bigint();
        for (let i = 0; i < asks; i++) await ask(head - fresh);
        const key = `${fresh}\t${shape}`;
        times.set(key, [...(times.get(key) ?? []), Number(process.hrtime.bigint() - t0) / 1e6 / asks]);
      }
    }
    process.stderr.write(`# round ${round + 1}/${rounds} done\n`);
  }
  console.log(`new events\tshape\tms per question (median of ${rounds} rounds)`);
  for (const [key, ms] of times) {
    const sorted = [...ms].sort((a, b) => a - b);
    console.log(`${key}\t${sorted[Math.floor(sorted.length / 2)]!.toFixed(2)}`);
  }
} finally {
  await store.close();
  await resources.cleanup();
}
