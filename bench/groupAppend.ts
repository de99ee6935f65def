// Where the time of 16 concurrent single-event appends to the PostgreSQL store goes (docs/benchmarks.md,
// "Known to be missed"): the groups the store sends, `append_batch`'s own time per group in
// PostgreSQL (`track_functions = 'all'`), and this process's CPU per event, beside the wall time:
//   node --import tsx bench/groupAppend.ts [postgres-url] [events] [rounds]
// Creates a database, appends `events` (default 32,000) from 16 callers `rounds` times (default 3)
// after a warm-up, prints each round, and drops the database.
import pg from 'pg';
import { appendInCalls } from '../src/bench/scenarios/sqliteAppend.js';
import { openPostgresStore } from '../src/postgres/index.js';
import { BenchResources } from '../src/bench/resources.js';

const [url = 'postgres://postgres@127.0.0.1:5432/postgres', eventsArg = '32000', roundsArg = '3'] =
  process.argv.slice(2);
const events = Number(eventsArg);
const rounds = Number(roundsArg);

const resources = new BenchResources(url);
const dbUrl = await resources.postgresDatabase(["track_functions = 'all'"]);
const store = await openPostgresStore({ connectionString: dbUrl });
const stats = new pg.Client({ connectionString: dbUrl });
await stats.connect();

/** `append_batch`'s calls and times (ms) so far, as the statistics collector has them. */
async function batchStats(): Promise<{ calls: number; total: number; self: number }> {
  // A new snapshot of the statistics, after the backends have reported (every 500 ms at most).
  await new Promise((resolve) => setTimeout(resolve, 600));
  await stats.query('SELECT pg_stat_clear_snapshot()');
  const r = await stats.query<{ calls: string; total_time: number; self_time: number }>(
    `SELECT calls, total_time, self_time FROM pg_stat_user_functions WHERE funcname = 'append_batch'`,
  );
  const row = r.rows[0];
  return { calls: Number(row?.calls ?? 0), total: row?.total_time ?? 0, self: row?.self_time ?? 0 };
}

try {
  await appendInCalls(store, Math.max(1_000, events / 5), 1, 16, 'v7');
  console.log(
    'round\tevents/s\tgroups\tevents/group\twall µs/group\tappend_batch µs/group (self)\tCPU µs/event here',
  );
  for (let round = 1; round <= rounds; round++) {
    const before = await batchStats();
    const cpu = process.cpuUsage();
    const timed = await appendInCalls(store, events, 1, 16, 'v7');
    const used = process.cpuUsage(cpu);
    const after = await batchStats();
    const groups = after.calls - before.calls;
    const wall = (events / timed.eventsPerSec) * 1e6;
    console.log(
      [
        round,
        Math.round(timed.eventsPerSec),
        groups,
        (events / groups).toFixed(1),
        (wall / groups).toFixed(0),
        `${((1000 * (after.total - before.total)) / groups).toFixed(0)} (${((1000 * (after.self - before.self)) / groups).toFixed(0)})`,
        ((used.user + used.system) / events).toFixed(1),
      ].join('\t'),
    );
  }
} finally {
  await stats.end();
  await store.close();
  await resources.cleanup();
}
