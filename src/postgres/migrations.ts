import { checkout } from './checkout.js';
import type { Pool } from 'pg';
import { appendChannel, quoteSchema } from './schemaName.js';

/** One numbered schema step. Versions are 1, 2, 3, ... and never change once released. */
export interface PostgresMigration {
  version: number;
  name: string;
  /** The DDL for the schema `s` (already quoted), run inside the migration transaction. */
  sql: (s: string, schema: string) => string;
}

/** The advisory-lock class of idem's migrations ('idem' in ASCII); the second key is the schema's hash. */
const MIGRATION_LOCK_CLASS = 0x6964656d;

/**
 * The event store's schema. Append new steps at the end; never edit a released one.
 *
 * `head` is the position allocator: a single row whose update serialises appends until they commit,
 * so positions are handed out in commit order with no gaps (see docs/postgres.md).
 */
export const EVENT_STORE_MIGRATIONS: PostgresMigration[] = [
  {
    version: 1,
    name: 'events',
    sql: (s, schema) => `
      CREATE TABLE ${s}.events (
        position    bigint      PRIMARY KEY,
        id          uuid        NOT NULL UNIQUE,
        stream      text        NOT NULL,
        version     integer     NOT NULL,
        type        text        NOT NULL,
        data        json        NOT NULL,
        metadata    json        NOT NULL,
        recorded_at timestamptz NOT NULL,
        UNIQUE (stream, version)
      );
      CREATE TABLE ${s}.head (
        id       boolean PRIMARY KEY DEFAULT true CHECK (id),
        position bigint  NOT NULL
      );
      INSERT INTO ${s}.head (id, position) VALUES (true, 0);

      -- Several appends in one statement and one transaction (the store groups concurrent appends).
      -- The head row lock is taken first and held until commit: positions are handed out in commit
      -- order with no gaps, and every check below sees all earlier commits. Per append (events
      -- p_counts[i] long, flattened into the event arrays) the outcome is 'ok', 'exists' (one of its
      -- ids is already stored: the caller resolves idempotency) or 'wrong_expected_version'
      -- (version = the stream's actual version); nothing is written for the last two.
      CREATE FUNCTION ${s}.append_batch(
        p_streams text[], p_expected text[], p_counts integer[],
        p_ids uuid[], p_types text[], p_data text[], p_metadata text[]
      ) RETURNS TABLE (outcome text, version integer, first_position bigint, last_position bigint)
      LANGUAGE plpgsql AS $fn$
      DECLARE
        i         integer;
        n         integer;
        off       integer := 0;
        v_ids     uuid[];
        v_head    bigint;
        v_current integer;
        v_now     timestamptz;
        v_stream  text;
        v_exp     text;
      BEGIN
        SELECT h.position INTO v_head FROM ${s}.head h WHERE h.id FOR UPDATE;
        v_now := clock_timestamp();
        FOR i IN 1 .. coalesce(cardinality(p_streams), 0) LOOP
          n := p_counts[i];
          v_ids := p_ids[off + 1 : off + n];
          v_stream := p_streams[i];
          v_exp := p_expected[i];
          outcome := NULL; version := NULL; first_position := NULL; last_position := NULL;
          IF EXISTS (SELECT 1 FROM ${s}.events e WHERE e.id = ANY(v_ids)) THEN
            outcome := 'exists';
          ELSE
            SELECT coalesce(max(e.version), 0) INTO v_current FROM ${s}.events e WHERE e.stream = v_stream;
            IF NOT (v_exp = 'any'
                    OR (v_exp = 'no_stream' AND v_current = 0)
                    OR (v_exp = 'stream_exists' AND v_current > 0)
                    OR (v_exp ~ '^[0-9]+$' AND v_current::numeric = v_exp::numeric)) THEN
              outcome := 'wrong_expected_version';
              version := v_current;
            ELSE
              INSERT INTO ${s}.events (position, id, stream, version, type, data, metadata, recorded_at)
              SELECT v_head + t.ord, t.id, v_stream, v_current + t.ord, t.type, t.data::json, t.metadata::json, v_now
              FROM unnest(v_ids, p_types[off + 1 : off + n], p_data[off + 1 : off + n], p_metadata[off + 1 : off + n])
                   WITH ORDINALITY AS t(id, type, data, metadata, ord);
              outcome := 'ok';
              version := v_current + n;
              first_position := v_head + 1;
              last_position := v_head + n;
              v_head := v_head + n;
            END IF;
          END IF;
          off := off + n;
          RETURN NEXT;
        END LOOP;
        UPDATE ${s}.head h SET position = v_head WHERE h.id AND h.position <> v_head;
        IF FOUND THEN
          PERFORM pg_notify('${appendChannel(schema)}', v_head::text);
        END IF;
      END
      $fn$;
    `,
  },
  {
    // The same function, set-based: a fixed handful of statements per call however many appends
    // it groups, instead of three per append. Same signature and outcomes, so a process still
    // running the version-1 code keeps working against an upgraded schema.
    version: 3,
    name: 'set-based append_batch',
    sql: (s, schema) => appendBatchSql(s, schema, false),
  },
  {
    // One append alone (what a sequential caller sends, and what the store sends when no other
    // append waits): the same checks and outcomes as append_batch with one append, in four
    // statements instead of about a dozen. append_batch stays for groups and for processes still
    // running older code.
    version: 4,
    name: 'append_one',
    sql: (s, schema) => appendOneSql(s, schema, false),
  },
  {
    // The partition key of consumer groups: 32-bit FNV-1a of the stream name's UTF-8 bytes, as an
    // unsigned number. A generated column: computed for the rows already stored (the table is
    // rewritten once) and for every insert, whichever code path writes it.
    version: 9,
    name: 'stream hash',
    sql: (s) => `
      CREATE FUNCTION ${s}.stream_hash(p_stream text) RETURNS bigint
      LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
      DECLARE
        b bytea := convert_to(p_stream, 'UTF8');
        h bigint := 2166136261;
        i integer;
      BEGIN
        FOR i IN 0 .. length(b) - 1 LOOP
          h := ((h # get_byte(b, i)) * 16777619) & 4294967295;
        END LOOP;
        RETURN h;
      END
      $fn$;
      ALTER TABLE ${s}.events ADD COLUMN stream_hash bigint GENERATED ALWAYS AS (${s}.stream_hash(stream)) STORED;
    `,
  },
  {
    // The generated column ran stream_hash (a PL/pgSQL loop over the name's bytes) for every event
    // inserted; the append functions, the only writers of events, now compute it once per append
    // and write it. The column keeps its values (no rewrite: PostgreSQL 13 or later). Same
    // signatures and outcomes, so a process still running older code keeps working.
    version: 11,
    name: 'stream hash once per append',
    sql: (s, schema) => `
      ALTER TABLE ${s}.events ALTER COLUMN stream_hash DROP EXPRESSION;
      ${appendBatchSql(s, schema, true)}
      ${appendOneSql(s, schema, true)}
    `,
  },
  {
    // A group whose every append is written (the common group) is decided and written in one
    // statement instead of about a dozen (see wholeGroupSql). Same signature and outcomes, so a
    // process still running older code keeps working.
    version: 12,
    name: 'append_batch writes a whole group in one statement',
    sql: (s, schema) => appendBatchSql(s, schema, true, true),
  },
  {
    // One event appended alone (the commonest call: a command handler's one event): append_one's
    // checks and outcomes for one event, with scalar parameters instead of arrays of one and one
    // text result instead of a table of four columns. append_one stays for one append of several
    // events and for processes still running older code.
    version: 13,
    name: 'append_event',
    sql: (s, schema) => appendEventSql(s, schema),
  },
];

export interface MigrationTarget {
  pool: Pool;
  /** Unquoted schema name (already validated). */
  schema: string;
}

/** Where a set of migrations records its versions, and the advisory-lock class that serialises it. */
export interface MigrationLedger {
  /** Table in the schema holding the applied versions. */
  table: string;
  lockClass: number;
}

/** The event store's ledger. */
export const STORE_LEDGER: MigrationLedger = { table: 'schema_migrations', lockClass: MIGRATION_LOCK_CLASS };

/**
 * Brings the schema up to the newest of `migrations` and returns its version. Safe when several
 * processes start at once: each takes a transaction-scoped advisory lock on the schema before
 * creating anything, so the second waits for the first, then sees the recorded versions and applies
 * nothing. A schema already up to date is recognised without taking the lock.
 */
export async function runPgMigrations(
  target: MigrationTarget,
  migrations: readonly PostgresMigration[],
  ledger: MigrationLedger = STORE_LEDGER,
): Promise<number> {
  const s = quoteSchema(target.schema);
  const table = `${s}.${ledger.table}`;
  const sorted = [...migrations].sort((a, b) => a.version - b.version);
  const latest = sorted[sorted.length - 1]?.version ?? 0;
  if ((await currentVersion(target, ledger)) >= latest) return latest;
  const { client, release } = await checkout(target.pool);
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [ledger.lockClass, target.schema]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${table} (
         version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const r = await client.query<{ v: number }>(`SELECT coalesce(max(version), 0)::int AS v FROM ${table}`);
    let current = r.rows[0]?.v ?? 0;
    for (const m of sorted) {
      if (m.version <= current) continue;
      await client.query(m.sql(s, target.schema));
      await client.query(`INSERT INTO ${table} (version, name) VALUES ($1, $2)`, [m.version, m.name]);
      current = m.version;
    }
    await client.query('COMMIT');
    release();
    return current;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    release(err instanceof Error ? err : true);
    throw err;
  }
}

/** The highest migration version recorded in the schema, 0 when it has none. */
export async function currentVersion(
  target: MigrationTarget,
  ledger: MigrationLedger = STORE_LEDGER,
): Promise<number> {
  const table = `${quoteSchema(target.schema)}.${ledger.table}`;
  const r = await target.pool.query<{ v: number | null }>(
    `SELECT CASE WHEN to_regclass($1) IS NULL THEN 0 END AS v`,
    [table],
  );
  if (r.rows[0]?.v === 0) return 0;
  const v = await target.pool.query<{ v: number }>(
    `SELECT coalesce(max(version), 0)::int AS v FROM ${table}`,
  );
  return v.rows[0]?.v ?? 0;
}

/** `append_batch`'s first checks: nothing to do for no appends, and one expected version and count per append. */
const APPEND_BATCH_SHAPE = `
        IF n_app = 0 THEN
          RETURN;
        END IF;
        IF cardinality(p_expected) <> n_app OR cardinality(p_counts) <> n_app THEN
          RAISE EXCEPTION 'append_batch: % streams, % expected versions, % counts',
            n_app, cardinality(p_expected), cardinality(p_counts);
        END IF;`;

/**
 * `append_batch` (migration 3; `hashed`: migration 11, which also writes `stream_hash`, computed once
 * per append instead of per event by a generated column; `whole`: migration 12, see
 * `wholeGroupSql`). `hashed: false` is migration 3's text, `whole: false` migration 11's.
 */
function appendBatchSql(s: string, schema: string, hashed: boolean, whole = false): string {
  return `
      -- Several appends in one statement and one transaction (the store groups concurrent appends).
      -- The head row lock is taken first and held until commit: positions are handed out in commit
      -- order with no gaps, and every check below sees all earlier commits. Per append (events
      -- p_counts[i] long, flattened into the event arrays) the outcome is 'ok', 'exists' (one of its
      -- ids is already stored, or written by an earlier append of this call: the caller resolves
      -- idempotency) or 'wrong_expected_version' (version = the stream's actual version, counting
      -- earlier appends of this call); nothing is written for the last two.
      --
      -- Every read of the events table is an equality probe on a unique index (id) or a backward
      -- scan of (stream, version), one per event or append, so its plan stays the same whatever the
      -- table's size or statistics were when the plan was cached. (Version 1 used
      -- EXISTS (... id = ANY(ids)), whose plan, cached while the table was small, became a
      -- sequential scan of the whole table per append.)
      CREATE OR REPLACE FUNCTION ${s}.append_batch(
        p_streams text[], p_expected text[], p_counts integer[],
        p_ids uuid[], p_types text[], p_data text[], p_metadata text[]
      ) RETURNS TABLE (outcome text, version integer, first_position bigint, last_position bigint)
      LANGUAGE plpgsql${whole ? ' SET plan_cache_mode = force_generic_plan' : ''} AS $fn$
      DECLARE
        n_app     integer := coalesce(cardinality(p_streams), 0);${whole ? '\n        n_ev      integer := coalesce(cardinality(p_ids), 0);' : ''}
        v_head    bigint;
        v_start   bigint;
        v_now     timestamptz;
        v_app     integer[];  -- per event: its append (1-based)
        v_k       integer[];  -- per event: its place in its append (1-based)
        v_stored  boolean[];  -- per append: one of its ids is already stored
        v_clash   boolean[];  -- per append: shares an id with an earlier append of this call
        v_slot    integer[];  -- per append: the first append of this call to the same stream
        v_ver     integer[];  -- per slot: the stream's version so far
        v_outcome text[];
        v_version integer[];
        v_first   bigint[];
        v_last    bigint[];
        v_base    integer[];
        i         integer;
        n         integer;
        v_cur     integer;
        v_exp     text;${hashed ? '\n        v_hash    bigint[];  -- per append: stream_hash of its stream' : ''}
      BEGIN${
        whole
          ? wholeGroupSql(s, schema)
          : `
        SELECT h.position INTO v_head FROM ${s}.head h WHERE h.id FOR UPDATE;
        v_now := clock_timestamp();${APPEND_BATCH_SHAPE}`
      }

        SELECT array_agg(c.a ORDER BY c.a, g.k), array_agg(g.k ORDER BY c.a, g.k)
          INTO v_app, v_k
          FROM unnest(p_counts) WITH ORDINALITY AS c(n, a), generate_series(1, c.n) AS g(k);
        IF coalesce(cardinality(v_app), 0) <> coalesce(cardinality(p_ids), 0)
           OR cardinality(p_ids) <> cardinality(p_types)
           OR cardinality(p_ids) <> cardinality(p_data)
           OR cardinality(p_ids) <> cardinality(p_metadata) THEN
          RAISE EXCEPTION 'append_batch: counts add up to % events, got % ids', cardinality(v_app), cardinality(p_ids);
        END IF;

        -- Ids already stored: one unique-index probe per event.
        v_stored := array_fill(false, ARRAY[n_app]);
        FOR i IN
          SELECT DISTINCT e.a
            FROM unnest(p_ids, v_app) AS e(id, a)
            CROSS JOIN LATERAL (SELECT 1 FROM ${s}.events x WHERE x.id = e.id LIMIT 1) AS hit
        LOOP
          v_stored[i] := true;
        END LOOP;

        -- Ids shared with an earlier append of this call (a retried append grouped with itself, or a
        -- conflicting one): decided below, once the earlier append's outcome is known.
        v_clash := array_fill(false, ARRAY[n_app]);
        FOR i IN
          SELECT DISTINCT b.a
            FROM unnest(p_ids, v_app) AS b(id, a)
            JOIN unnest(p_ids, v_app) AS c(id, a) ON c.id = b.id AND c.a < b.a
        LOOP
          v_clash[i] := true;
        END LOOP;

        -- Each stream's stored version: one backward index probe per append.
        SELECT array_agg(t.slot ORDER BY t.a), array_agg(t.cur ORDER BY t.a)
          INTO v_slot, v_ver
          FROM (
            SELECT u.a, min(u.a) OVER (PARTITION BY u.s) AS slot,
                   coalesce((SELECT max(x.version) FROM ${s}.events x WHERE x.stream = u.s), 0) AS cur
              FROM unnest(p_streams) WITH ORDINALITY AS u(s, a)
          ) AS t;

        -- The outcomes, in order, in memory.
        v_start := v_head;
        v_outcome := array_fill(NULL::text, ARRAY[n_app]);
        v_version := array_fill(NULL::integer, ARRAY[n_app]);
        v_first := array_fill(NULL::bigint, ARRAY[n_app]);
        v_last := array_fill(NULL::bigint, ARRAY[n_app]);
        v_base := array_fill(NULL::integer, ARRAY[n_app]);
        FOR i IN 1 .. n_app LOOP
          n := p_counts[i];
          IF v_stored[i] OR (v_clash[i] AND EXISTS (
               SELECT 1
                 FROM unnest(p_ids, v_app) AS b(id, a)
                 JOIN unnest(p_ids, v_app) AS c(id, a) ON c.id = b.id
                WHERE b.a = i AND c.a < i AND v_outcome[c.a] = 'ok')) THEN
            v_outcome[i] := 'exists';
            CONTINUE;
          END IF;
          v_cur := v_ver[v_slot[i]];
          v_exp := p_expected[i];
          IF NOT (v_exp = 'any'
                  OR (v_exp = 'no_stream' AND v_cur = 0)
                  OR (v_exp = 'stream_exists' AND v_cur > 0)
                  OR (v_exp ~ '^[0-9]+$' AND v_cur::numeric = v_exp::numeric)) THEN
            v_outcome[i] := 'wrong_expected_version';
            v_version[i] := v_cur;
            CONTINUE;
          END IF;
          v_outcome[i] := 'ok';
          v_base[i] := v_cur;
          v_version[i] := v_cur + n;
          v_first[i] := v_head + 1;
          v_last[i] := v_head + n;
          v_head := v_head + n;
          v_ver[v_slot[i]] := v_cur + n;
        END LOOP;

        -- Every written event in one statement.
        IF v_head > v_start THEN${hashed ? `\n          v_hash := ARRAY(SELECT ${s}.stream_hash(u.s) FROM unnest(p_streams) WITH ORDINALITY AS u(s, a) ORDER BY u.a);` : ''}
          INSERT INTO ${s}.events (position, id, stream, version, type, data, metadata, recorded_at${hashed ? ', stream_hash' : ''})
          SELECT w.first_position + e.k - 1, e.id, w.stream, w.base + e.k, e.type, e.data::json, e.metadata::json, v_now${hashed ? ', w.hash' : ''}
            FROM unnest(v_app, v_k, p_ids, p_types, p_data, p_metadata) AS e(a, k, id, type, data, metadata)
            JOIN (
              SELECT o.a, o.first_position, o.base, o.stream${hashed ? ', o.hash' : ''}
                FROM unnest(v_outcome, v_first, v_base, p_streams${hashed ? ', v_hash' : ''}) WITH ORDINALITY
                     AS o(outcome, first_position, base, stream${hashed ? ', hash' : ''}, a)
               WHERE o.outcome = 'ok'
            ) AS w ON w.a = e.a
           ORDER BY 1;
          UPDATE ${s}.head h SET position = v_head WHERE h.id;
          PERFORM pg_notify('${appendChannel(schema)}', v_head::text);
        END IF;

        RETURN QUERY
          SELECT o.outcome, o.version, o.first_position, o.last_position
            FROM unnest(v_outcome, v_version, v_first, v_last) WITH ORDINALITY
                 AS o(outcome, version, first_position, last_position, a)
           ORDER BY o.a;
      END
      $fn$;
    `;
}

/**
 * The start of migration 12's `append_batch`. Its earlier text decides the appends one by one in a
 * PL/pgSQL loop, about a dozen statements whatever the call holds (500 µs for 16 single-event
 * appends, by `pg_stat_user_functions`). The common call, a group whose every append is written (no
 * stored or repeated id, every expected version met, counting the earlier appends of the call to
 * the same stream), is instead decided and written by one statement after the head row's update,
 * which takes the allocator's lock and the positions of all the call's events at once, as
 * `append_one` does. When one append would not be written, that statement writes nothing; the head
 * is put back and the loop below decides each append as before, under the same lock.
 */
function wholeGroupSql(s: string, schema: string): string {
  return `${APPEND_BATCH_SHAPE}
        UPDATE ${s}.head h SET position = h.position + n_ev WHERE h.id RETURNING h.position - n_ev INTO v_head;
        v_now := clock_timestamp();

        -- Per append w: its events' place in the call (before: the events of earlier appends) and
        -- its stream's version before it (base: stored, plus the earlier appends to the stream).
        IF cardinality(p_types) = n_ev AND cardinality(p_data) = n_ev AND cardinality(p_metadata) = n_ev THEN
          RETURN QUERY
            WITH w AS MATERIALIZED (
              SELECT u.a, u.s, u.n, u.e, ${s}.stream_hash(u.s) AS hash,
                     sum(u.n) OVER (ORDER BY u.a) - u.n AS before,
                     coalesce((SELECT max(x.version) FROM ${s}.events x WHERE x.stream = u.s), 0)
                       + coalesce(sum(u.n) OVER (PARTITION BY u.s ORDER BY u.a
                                                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS base
                FROM unnest(p_streams, p_expected, p_counts) WITH ORDINALITY AS u(s, e, n, a)
            ),
            chk AS MATERIALIZED (
              SELECT bool_and(w.n > 0 AND (w.e = 'any'
                                           OR (w.e = 'no_stream' AND w.base = 0)
                                           OR (w.e = 'stream_exists' AND w.base > 0)
                                           OR (w.e ~ '^[0-9]+$' AND w.base::numeric = w.e::numeric)))
                     AND sum(w.n) = n_ev
                     AND NOT EXISTS (SELECT 1 FROM unnest(p_ids) AS d(id)
                                       CROSS JOIN LATERAL (SELECT 1 FROM ${s}.events x WHERE x.id = d.id LIMIT 1) AS hit)
                     AND (SELECT count(DISTINCT d.id) FROM unnest(p_ids) AS d(id)) = n_ev AS ok
                FROM w
            ),
            ins AS (
              INSERT INTO ${s}.events (position, id, stream, version, type, data, metadata, recorded_at, stream_hash)
              SELECT v_head + w.before + g.k, ev.id, w.s, w.base + g.k, ev.type, ev.data::json, ev.metadata::json, v_now, w.hash
                FROM chk, w CROSS JOIN LATERAL generate_series(1, w.n) AS g(k)
                JOIN unnest(p_ids, p_types, p_data, p_metadata) WITH ORDINALITY AS ev(id, type, data, metadata, at)
                  ON ev.at = w.before + g.k
               WHERE chk.ok
               ORDER BY 1
            )
            SELECT 'ok'::text, (w.base + w.n)::integer, (v_head + w.before + 1)::bigint, (v_head + w.before + w.n)::bigint
              FROM chk, w
             WHERE chk.ok
             ORDER BY w.a;
          IF FOUND THEN
            PERFORM pg_notify('${appendChannel(schema)}', (v_head + n_ev)::text);
            RETURN;
          END IF;
        END IF;
        UPDATE ${s}.head h SET position = v_head WHERE h.id;`;
}

/**
 * The condition "a stream at version `version` meets the expected version `expected`" (`any`,
 * `no_stream`, `stream_exists` or a number as text), as `append_one` and `append_event` test it.
 */
function expectationMet(expected: string, version: string): string {
  return `(${expected} = 'any'
                OR (${expected} = 'no_stream' AND ${version} = 0)
                OR (${expected} = 'stream_exists' AND ${version} > 0)
                OR (${expected} ~ '^[0-9]+$' AND ${version}::numeric = ${expected}::numeric))`;
}

/**
 * `append_event` (migration 13): `append_one` for one event. Sent on every call its time is a fixed
 * cost over a raw single-row INSERT, and the arrays (decoded by PostgreSQL, subscripted by the
 * function) and the four-column table (a tuplestore, and a row description that `pg` reads per call)
 * were 20 to 30 µs of it (docs/postgres.md, "Where an append's time goes"). Its one result is
 * `ok <version> <position>`, `exists` or `wrong_expected_version <the stream's version>`.
 */
function appendEventSql(s: string, schema: string): string {
  return `
      CREATE FUNCTION ${s}.append_event(
        p_stream text, p_expected text, p_id uuid, p_type text, p_data text, p_metadata text
      ) RETURNS text
      LANGUAGE plpgsql AS $fn$
      DECLARE
        v_head  bigint;
        v_cur   integer;
        v_found boolean;
      BEGIN
        -- As append_one: the head row first (the allocator's lock until commit, and the position),
        -- then the checks, each statement with a snapshot taken under the lock.
        UPDATE ${s}.head h SET position = h.position + 1 WHERE h.id RETURNING h.position - 1 INTO v_head;
        SELECT EXISTS (SELECT 1 FROM ${s}.events x WHERE x.id = p_id),
               coalesce((SELECT max(x.version) FROM ${s}.events x WHERE x.stream = p_stream), 0)
          INTO v_found, v_cur;
        IF v_found THEN
          UPDATE ${s}.head h SET position = v_head WHERE h.id;
          RETURN 'exists';
        END IF;
        IF NOT ${expectationMet('p_expected', 'v_cur')} THEN
          UPDATE ${s}.head h SET position = v_head WHERE h.id;
          RETURN 'wrong_expected_version ' || v_cur;
        END IF;
        INSERT INTO ${s}.events (position, id, stream, version, type, data, metadata, recorded_at, stream_hash)
        VALUES (v_head + 1, p_id, p_stream, v_cur + 1, p_type, p_data::json, p_metadata::json, clock_timestamp(),
                ${s}.stream_hash(p_stream));
        PERFORM pg_notify('${appendChannel(schema)}', (v_head + 1)::text);
        RETURN 'ok ' || (v_cur + 1) || ' ' || (v_head + 1);
      END
      $fn$;
    `;
}

/** `append_one` (migration 4; `hashed`: migration 11, as `appendBatchSql`). `hashed: false` is migration 4's text. */
function appendOneSql(s: string, schema: string, hashed: boolean): string {
  return `
      -- One append of cardinality(p_ids) events to p_stream: 'ok', 'exists' (one of its ids is already
      -- stored) or 'wrong_expected_version' (version = the stream's actual version), as append_batch.
      --
      -- The head row is updated first: that takes the allocator's lock (held until commit, so
      -- positions stay in commit order and gap-free) and the positions in one statement, where
      -- append_batch locks with SELECT ... FOR UPDATE and updates later (two row writes, two WAL
      -- records). Every later statement takes a new snapshot, so its checks see every earlier commit.
      -- When nothing is written the head is put back, and nothing is notified.
      CREATE ${hashed ? 'OR REPLACE ' : ''}FUNCTION ${s}.append_one(
        p_stream text, p_expected text, p_ids uuid[], p_types text[], p_data text[], p_metadata text[]
      ) RETURNS TABLE (outcome text, version integer, first_position bigint, last_position bigint)
      LANGUAGE plpgsql AS $fn$
      DECLARE
        n       integer := coalesce(cardinality(p_ids), 0);
        v_head  bigint;
        v_cur   integer;
        v_found boolean;
        v_now   timestamptz;${hashed ? '\n        v_hash  bigint;' : ''}
      BEGIN
        IF n = 0 OR cardinality(p_types) <> n OR cardinality(p_data) <> n OR cardinality(p_metadata) <> n THEN
          RAISE EXCEPTION 'append_one: % ids, % types, % data, % metadata',
            n, cardinality(p_types), cardinality(p_data), cardinality(p_metadata);
        END IF;
        UPDATE ${s}.head h SET position = h.position + n WHERE h.id RETURNING h.position - n INTO v_head;
        v_now := clock_timestamp();

        -- Ids already stored (a unique-index probe per id) and the stream's version (a backward
        -- index probe), in one statement.
        IF n = 1 THEN
          SELECT EXISTS (SELECT 1 FROM ${s}.events x WHERE x.id = p_ids[1]),
                 coalesce((SELECT max(x.version) FROM ${s}.events x WHERE x.stream = p_stream), 0)
            INTO v_found, v_cur;
        ELSE
          SELECT EXISTS (SELECT 1 FROM unnest(p_ids) AS u(id)
                           CROSS JOIN LATERAL (SELECT 1 FROM ${s}.events x WHERE x.id = u.id LIMIT 1) AS hit),
                 coalesce((SELECT max(x.version) FROM ${s}.events x WHERE x.stream = p_stream), 0)
            INTO v_found, v_cur;
        END IF;
        IF v_found THEN
          UPDATE ${s}.head h SET position = v_head WHERE h.id;
          outcome := 'exists';
          RETURN NEXT;
          RETURN;
        END IF;
        IF NOT ${expectationMet('p_expected', 'v_cur')} THEN
          UPDATE ${s}.head h SET position = v_head WHERE h.id;
          outcome := 'wrong_expected_version';
          version := v_cur;
          RETURN NEXT;
          RETURN;
        END IF;

${hashed ? `        v_hash := ${s}.stream_hash(p_stream);\n` : ''}        IF n = 1 THEN
          INSERT INTO ${s}.events (position, id, stream, version, type, data, metadata, recorded_at${hashed ? ', stream_hash' : ''})
          VALUES (v_head + 1, p_ids[1], p_stream, v_cur + 1, p_types[1], p_data[1]::json, p_metadata[1]::json, v_now${hashed ? ', v_hash' : ''});
        ELSE
          INSERT INTO ${s}.events (position, id, stream, version, type, data, metadata, recorded_at${hashed ? ', stream_hash' : ''})
          SELECT v_head + t.k, t.id, p_stream, v_cur + t.k, t.type, t.data::json, t.metadata::json, v_now${hashed ? ', v_hash' : ''}
            FROM unnest(p_ids, p_types, p_data, p_metadata) WITH ORDINALITY AS t(id, type, data, metadata, k);
        END IF;
        PERFORM pg_notify('${appendChannel(schema)}', (v_head + n)::text);
        outcome := 'ok';
        version := v_cur + n;
        first_position := v_head + 1;
        last_position := v_head + n;
        RETURN NEXT;
      END
      $fn$;
    `;
}
