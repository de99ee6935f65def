// What each statement of `append_one` costs a sequential caller (docs/postgres.md, "Where an
// append's time goes"): the function is copied with pieces taken out (for measurement only: a copy
// without its checks or its lock is not a correct append) and each copy is called the way the store
// calls it, beside raw single-row INSERTs and `store.append`, one event per call:
//   node --import tsx bench/appendVariants.ts [postgres-url] [calls-per-round] [rounds] [variants]
// variants: a comma-separated subset of the names below (default: all). Each variant writes into a
// database of its own; rounds are interleaved in a rotating order; the medians are printed, with the
// median over the rounds of each variant's time minus the raw insert's of the same round, and this
// process's CPU time per call (user and system, all its threads; median of the rounds).
// IDEM_PIN_BACKENDS=<cpu list> (Linux, PostgreSQL on this machine, run as root or as its user): after
// the warm-up, the PostgreSQL backends serving these databases are pinned to those CPUs with
// `taskset`; pin this process too (`taskset -c <cpus> node ...`) to put both on one core or apart.
import { execFileSync } from 'node:child_process';
import pg from 'pg';
import { RawPostgresEvents } from '../src/bench/rawPostgres.js';
import { loadPgModule } from '../src/bench/resources.js';
import { newEvent, rawRow, streamOf } from '../src/bench/workload.js';
import { textArray, uuidArray } from '../src/postgres/binaryArrays.js';
import { openPostgresStore, type PostgresEventStore } from '../src/postgres/index.js';

/** The pieces a copy can leave out, each as (the text in `append_one`, what replaces it). */
const PIECES = {
  notify: [/PERFORM pg_notify\([^;]*;/, ''],
  hash: [/v_hash := [^;]*;/, 'v_hash := 0;'],
  // Both probes (the id's and the stream's version): no id is taken for stored, and the version is
  // a random one (the bench's versions never reach it).
  probes: [
    /SELECT EXISTS \(SELECT 1 FROM "idem"\.events x WHERE x\.id = p_ids\[1\]\),\s*coalesce\(\(SELECT max\(x\.version\) FROM "idem"\.events x WHERE x\.stream = p_stream\), 0\)\s*INTO v_found, v_cur;/,
    'v_found := false; v_cur := (random() * 2e9)::int;',
  ],
  // The head row's update (the allocator's lock): positions from a sequence instead.
  head: [
    /UPDATE "idem"\.head h SET position = h\.position \+ n WHERE h\.id RETURNING h\.position - n INTO v_head;/,
    "v_head := nextval('public.variant_positions') - 1;",
  ],
} as const satisfies Record<string, readonly [RegExp, string]>;
type Piece = keyof typeof PIECES;

/**
 * `append_one` for one event with scalar parameters instead of arrays of one (no array to decode, no
 * subscript) and OUT parameters instead of a table (no tuplestore): the same statements otherwise.
 * (`append_event`, migration 13, has scalar parameters and returns one text instead.)
 */
const SCALAR_FUNCTION = `
  CREATE FUNCTION idem.append_variant(p_stream text, p_expected text, p_id uuid, p_type text, p_data text,
    p_metadata text, OUT outcome text, OUT version integer, OUT first_position bigint, OUT last_position bigint)
  LANGUAGE plpgsql AS $fn$
  DECLARE v_head bigint; v_cur integer; v_found boolean; v_now timestamptz;
  BEGIN
    UPDATE idem.head h SET position = h.position + 1 WHERE h.id RETURNING h.position - 1 INTO v_head;
    v_now := clock_timestamp();
    SELECT EXISTS (SELECT 1 FROM idem.events x WHERE x.id = p_id),
           coalesce((SELECT max(x.version) FROM idem.events x WHERE x.stream = p_stream), 0)
      INTO v_found, v_cur;
    IF v_found THEN
      UPDATE idem.head h SET position = v_head WHERE h.id;
      outcome := 'exists';
      RETURN;
    END IF;
    IF NOT (p_expected = 'any' OR (p_expected = 'no_stream' AND v_cur = 0)
            OR (p_expected = 'stream_exists' AND v_cur > 0)
            OR (p_expected ~ '^[0-9]+$' AND v_cur::numeric = p_expected::numeric)) THEN
      UPDATE idem.head h SET position = v_head WHERE h.id;
      outcome := 'wrong_expected_version';
      version := v_cur;
      RETURN;
    END IF;
    INSERT INTO idem.events (position, id, stream, version, type, data, metadata, recorded_at, stream_hash)
    VALUES (v_head + 1, p_id, p_stream, v_cur + 1, p_type, p_data::json, p_metadata::json, v_now,
            idem.stream_hash(p_stream));
    PERFORM pg_notify('idem_append_idem', (v_head + 1)::text);
    outcome := 'ok';
    version := v_cur + 1;
    first_position := v_head + 1;
    last_position := v_head + 1;
  END
  $fn$`;

/**
 * `append_event` as one data-modifying statement (for measurement only): the head row's update, the
 * probes, the insert and the notification in CTEs. The probes read the statement's snapshot, taken
 * before the head row's lock, so it inserts only when the head it updated is the one that snapshot
 * saw plus one (no append committed in between); otherwise, as when the id is stored or the
 * expected version is wrong, `append_refused` raises and the statement rolls back (a store would
 * then send it again, or answer as `append_event` does). `single statement` has its database plan
 * it generically; `single statement (default plans)` leaves the choice to PostgreSQL, which plans it
 * again on every call.
 */
const SINGLE_STATEMENT = `
  WITH snap AS (SELECT position FROM idem.head WHERE id),
       h AS (UPDATE idem.head SET position = position + 1 WHERE id RETURNING position),
       chk AS (SELECT EXISTS (SELECT 1 FROM idem.events x WHERE x.id = $3::uuid) AS found,
                      coalesce((SELECT max(x.version) FROM idem.events x WHERE x.stream = $1::text), 0) AS cur),
       ins AS (INSERT INTO idem.events (position, id, stream, version, type, data, metadata, recorded_at, stream_hash)
               SELECT h.position, $3::uuid, $1::text, chk.cur + 1, $4::text, $5::text::json, $6::text::json,
                      clock_timestamp(), idem.stream_hash($1::text)
               FROM h, chk, snap
               WHERE h.position = snap.position + 1 AND NOT chk.found
                 AND ($2::text = 'any' OR ($2::text = 'no_stream' AND chk.cur = 0)
                      OR ($2::text = 'stream_exists' AND chk.cur > 0)
                      OR ($2::text ~ '^[0-9]+$' AND chk.cur::numeric = $2::text::numeric))
               RETURNING position, version)
  SELECT CASE WHEN ins.position IS NULL THEN idem.append_refused()
              ELSE 'ok ' || ins.version || ' ' || ins.position
                   || left(pg_notify('idem_append_idem', ins.position::text)::text, 0) END AS r
  FROM (SELECT 1) one LEFT JOIN ins ON true`;

const REFUSED_FUNCTION = `
  CREATE FUNCTION idem.append_refused() RETURNS text LANGUAGE plpgsql AS $fn$
  BEGIN RAISE EXCEPTION 'append_refused: stored id, wrong expected version or a commit since the snapshot'; END
  $fn$`;

const VARIANTS: Record<string, readonly Piece[] | 'store' | 'scalar' | 'event' | 'single' | 'single-auto'> = {
  'store.append': 'store',
  append_event: 'event',
  'scalar parameters': 'scalar',
  'single statement': 'single',
  'single statement (default plans)': 'single-auto',
  append_one: [],
  'without notify': ['notify'],
  'without hash': ['hash'],
  'without notify and hash': ['notify', 'hash'],
  'without probes': ['probes'],
  'without head': ['head'],
  'insert only': ['notify', 'hash', 'probes', 'head'],
};

const [url = 'postgres://postgres@127.0.0.1:5432/postgres', callsArg = '1500', roundsArg = '9', only] =
  process.argv.slice(2);
const calls = Number(callsArg);
const rounds = Number(roundsArg);
if (!Number.isInteger(calls) || calls < 10 || calls > 1_000_000)
  throw new Error('calls-per-round: must be an integer from 10 to 1,000,000');
if (!Number.isInteger(rounds) || rounds < 1 || rounds > 100)
  throw new Error('rounds: must be an integer from 1 to 100');
const names = only === undefined ? Object.keys(VARIANTS) : only.split(',').map((n) => n.trim());
for (const n of names)
  if (!(n in VARIANTS))
    throw new Error(`variants: unknown "${n}" (known: ${Object.keys(VARIANTS).join(', ')})`);

const admin = new pg.Client({ connectionString: url });
await admin.connect();
const tag = `${process.pid}_${Date.now().toString(36)}`;
const databases = new Map<string, string>([['raw', `variant_raw_${tag}`]]);
names.forEach((n, i) => databases.set(n, `variant_${i}_${tag}`));
const urlOf = (database: string): string => {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.href;
};
for (const database of databases.values()) await admin.query(`CREATE DATABASE ${database}`);

const stores: PostgresEventStore[] = [];
try {
  const raw = await RawPostgresEvents.open(await loadPgModule(), urlOf(databases.get('raw')!));
  const next = new Map<string, number>();
  const take = (name: string): number => {
    const i = next.get(name) ?? 0;
    next.set(name, i + 1);
    return i;
  };
  const shapes = new Map<string, () => Promise<void>>([
    [
      'raw INSERT',
      async () => {
        for (let k = 0; k < calls; k++) await raw.write([rawRow(take('raw'))]);
      },
    ],
  ]);
  /** The shape `name`: `calls` calls one after another, each with the next event of its own numbering. */
  const sequential = (
    name: string,
    call: (i: number, e: ReturnType<typeof newEvent>) => Promise<unknown>,
  ): void => {
    shapes.set(name, async () => {
      for (let k = 0; k < calls; k++) {
        const i = take(name);
        await call(i, newEvent(i, 'v7'));
      }
    });
  };
  for (const name of names) {
    const variant = VARIANTS[name]!;
    if (variant === 'single')
      await admin.query(`ALTER DATABASE ${databases.get(name)!} SET plan_cache_mode = force_generic_plan`);
    const store = await openPostgresStore({ connectionString: urlOf(databases.get(name)!) });
    stores.push(store);
    if (variant === 'single' || variant === 'single-auto') {
      await store.pool.query(REFUSED_FUNCTION);
      sequential(name, (i, e) =>
        store.pool.query({
          name: 'single_statement_variant',
          text: SINGLE_STATEMENT,
          values: [streamOf(i), 'any', e.id, e.type, JSON.stringify(e.data), JSON.stringify(e.metadata)],
        }),
      );
      continue;
    }
    if (variant === 'store') {
      sequential(name, (i, e) => store.append(streamOf(i), [e]));
      continue;
    }
    if (variant === 'event' || variant === 'scalar') {
      // One event's fields as scalar parameters: the store's append_event, or the OUT-parameter copy.
      if (variant === 'scalar') await store.pool.query(SCALAR_FUNCTION);
      const text =
        variant === 'event'
          ? 'SELECT idem.append_event($1::text, $2::text, $3::uuid, $4::text, $5::text, $6::text) AS r'
          : 'SELECT outcome, version, first_position, last_position FROM idem.append_variant($1, $2, $3, $4, $5, $6)';
      sequential(name, (i, e) =>
        store.pool.query({
          name: `${variant}_variant`,
          text,
          values: [streamOf(i), 'any', e.id, e.type, JSON.stringify(e.data), JSON.stringify(e.metadata)],
        }),
      );
      continue;
    }
    const { rows } = await store.pool.query<{ d: string }>(
      `SELECT pg_get_functiondef('idem.append_one'::regproc) AS d`,
    );
    let text = rows[0]!.d.replace('FUNCTION idem.append_one(', 'FUNCTION idem.append_variant(');
    for (const piece of variant) {
      const [pattern, replacement] = PIECES[piece];
      const changed = text.replace(pattern, replacement);
      if (changed === text) throw new Error(`${name}: the function has no ${piece} to take out`);
      text = changed;
    }
    await store.pool.query('CREATE SEQUENCE public.variant_positions START 1000000000');
    await store.pool.query(text);
    sequential(name, (i, e) =>
      store.pool.query({
        name: 'append_variant',
        text: 'SELECT outcome, version, first_position, last_position FROM idem.append_variant($1::text, $2::text, $3::uuid[], $4::text[], $5::text[], $6::text[])',
        values: [
          streamOf(i),
          'any',
          uuidArray([e.id]),
          textArray([e.type]),
          textArray([JSON.stringify(e.data)]),
          textArray([JSON.stringify(e.metadata)]),
        ],
      }),
    );
  }

  const order = [...shapes.keys()];
  const micros = new Map<string, number[]>(order.map((n) => [n, []]));
  const cpuMicros = new Map<string, number[]>(order.map((n) => [n, []]));
  for (const name of order) await shapes.get(name)!(); // warm-up, not counted
  const pinTo = process.env.IDEM_PIN_BACKENDS;
  if (pinTo !== undefined) {
    const { rows } = await admin.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE datname = ANY($1::text[])',
      [[...databases.values()]],
    );
    for (const { pid } of rows) execFileSync('taskset', ['-pc', pinTo, String(pid)], { stdio: 'ignore' });
    console.error(`# pinned ${rows.length} PostgreSQL backends to CPUs ${pinTo}`);
  }
  for (let r = 0; r < rounds; r++) {
    const rotated = [...order.slice(r % order.length), ...order.slice(0, r % order.length)];
    for (const name of rotated) {
      const cpu = process.cpuUsage();
      const start = process.hrtime.bigint();
      await shapes.get(name)!();
      micros.get(name)!.push(Number(process.hrtime.bigint() - start) / 1000 / calls);
      const used = process.cpuUsage(cpu);
      cpuMicros.get(name)!.push((used.user + used.system) / calls);
    }
    console.error(`# round ${r + 1}/${rounds} done`);
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  const rawMicros = micros.get('raw INSERT')!;
  console.log(
    `${calls} calls per variant and round, ${rounds} rounds; µs per call (time, and this process's CPU), median of the rounds`,
  );
  for (const name of order) {
    const xs = micros.get(name)!;
    const over = median(xs.map((x, i) => x - rawMicros[i]!));
    console.log(
      `${name.padEnd(33)} ${median(xs).toFixed(1).padStart(7)} µs, CPU ${median(cpuMicros.get(name)!).toFixed(1).padStart(5)} µs` +
        (name === 'raw INSERT'
          ? ''
          : `  (raw INSERT + ${over.toFixed(1)} µs; raw / this ${(median(rawMicros) / median(xs)).toFixed(2)}x)`),
    );
  }
  await raw.close();
} finally {
  for (const store of stores) await store.close();
  for (const database of databases.values())
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.end();
}
