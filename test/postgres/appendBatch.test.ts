// The grouped append path: `append_batch` deciding several appends in one call, each with its own
// checks and result, and the migration that replaces it in existing schemas.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import pg from 'pg';
import { isIdemError, WrongExpectedVersionError } from '../../src/core/errors.js';
import { streamHash } from '../../src/core/streamHash.js';
import type { AppendResult, NewEvent } from '../../src/core/event.js';
import { openPostgresStore } from '../../src/postgres/index.js';
import { runPgMigrations } from '../../src/postgres/migrations.js';
import { STORE_MIGRATIONS, type PostgresEventStore } from '../../src/postgres/postgresStore.js';
import { quoteSchema } from '../../src/postgres/schemaName.js';
import { randomIdentifier, randomStream } from '../support/names.js';
import { pgTestContext } from './pgFixtures.js';

const ctx = await pgTestContext();

interface Append {
  stream: string;
  expected: string;
  ids: string[];
}

interface Outcome {
  outcome: string;
  version: number | null;
  first_position: string | null;
  last_position: string | null;
}

/** Calls `append_batch` directly with `appends` (one statement: they are decided together). */
async function appendBatch(store: PostgresEventStore, appends: Append[]): Promise<Outcome[]> {
  const ids = appends.flatMap((a) => a.ids);
  const r = await store.pool.query<Outcome>(
    `SELECT outcome, version, first_position, last_position
       FROM ${quoteSchema(store.schema)}.append_batch($1::text[], $2::text[], $3::int[], $4::uuid[], $5::text[], $6::text[], $7::text[])`,
    [
      appends.map((a) => a.stream),
      appends.map((a) => a.expected),
      appends.map((a) => a.ids.length),
      ids,
      ids.map(() => 't'),
      ids.map((id) => JSON.stringify({ id })),
      ids.map(() => '{}'),
    ],
  );
  return r.rows;
}

function ok(version: number, first: number, last: number): Outcome {
  return { outcome: 'ok', version, first_position: String(first), last_position: String(last) };
}
const exists: Outcome = { outcome: 'exists', version: null, first_position: null, last_position: null };
function wrong(actual: number): Outcome {
  return { outcome: 'wrong_expected_version', version: actual, first_position: null, last_position: null };
}

/** The model's expected-version rule: does a stream at version `current` meet `expected`? */
function meets(expected: string, current: number): boolean {
  return (
    expected === 'any' ||
    (expected === 'no_stream' && current === 0) ||
    (expected === 'stream_exists' && current > 0) ||
    Number(expected) === current
  );
}

/** The log holds exactly what a model wrote: each stream's ids in version order, positions 1..N. */
async function assertLogHolds(
  store: PostgresEventStore,
  streams: string[],
  stored: Map<string, string[]>,
): Promise<void> {
  for (const stream of streams) {
    const inStream: string[] = [];
    for await (const e of store.readStream(stream)) inStream.push(e.id);
    assert.deepEqual(inStream, stored.get(stream) ?? []);
  }
  const log = await rows(store);
  assert.deepEqual(
    log.map((e) => e.position),
    Array.from({ length: log.length }, (_, i) => i + 1),
  );
}

const ids = (n: number): string[] => Array.from({ length: n }, () => randomUUID());

async function rows(
  store: PostgresEventStore,
): Promise<{ position: number; id: string; stream: string; version: number }[]> {
  const out = [];
  for await (const e of store.readAll())
    out.push({ position: e.position, id: e.id, stream: e.stream, version: e.version });
  return out;
}

describe('append_batch: several appends decided in one call', { skip: ctx.skip }, () => {
  it('checks each append against the stored log and the earlier appends of the same call', async () => {
    const store = await ctx.openSharedStore();
    try {
      const [s1, s2, s3, s4] = [randomStream(), randomStream(), randomStream(), randomStream()];
      const stored = ids(1);
      assert.deepEqual(await appendBatch(store, [{ stream: s4, expected: 'any', ids: stored }]), [
        ok(1, 1, 1),
      ]);

      const a = ids(2);
      const c = ids(1);
      const got = await appendBatch(store, [
        { stream: s1, expected: 'no_stream', ids: a }, // ok: versions 1-2, positions 2-3
        { stream: s1, expected: '2', ids: ids(1) }, // sees the append before it: ok, version 3
        { stream: s1, expected: '2', ids: c }, // stale within the call: actual 3
        { stream: s2, expected: 'any', ids: [...ids(1), a[1]!] }, // an id written earlier in this call
        { stream: s3, expected: 'any', ids: c }, // shares an id only with a failed append: ok
        { stream: s2, expected: 'stream_exists', ids: ids(1) }, // s2 got nothing: actual 0
        { stream: s3, expected: 'no_stream', ids: [stored[0]!] }, // an id already stored: exists wins
        { stream: s4, expected: '1', ids: ids(3) }, // ok after the stored event: versions 2-4
        { stream: s2, expected: 'no_stream', ids: ids(1) }, // still empty: ok
      ]);
      assert.deepEqual(got, [
        ok(2, 2, 3),
        ok(3, 4, 4),
        wrong(3),
        exists,
        ok(1, 5, 5),
        wrong(0),
        exists,
        ok(4, 6, 8),
        ok(1, 9, 9),
      ]);
      assert.equal(await store.headPosition(), 9);
      const log = await rows(store);
      assert.deepEqual(
        log.map((e) => e.position),
        Array.from({ length: 9 }, (_, i) => i + 1),
      );
      assert.deepEqual(
        log.map((e) => `${e.stream}@${e.version}`),
        [`${s4}@1`, `${s1}@1`, `${s1}@2`, `${s1}@3`, `${s3}@1`, `${s4}@2`, `${s4}@3`, `${s4}@4`, `${s2}@1`],
      );
      assert.deepEqual(
        log.slice(1, 3).map((e) => e.id),
        a,
      );
      assert.equal(log[4]!.id, c[0]);
    } finally {
      await store.close();
    }
  });

  it('writes nothing and leaves the head alone when no append of the call succeeds', async () => {
    const store = await ctx.openSharedStore();
    try {
      const stream = randomStream();
      const first = ids(2);
      await appendBatch(store, [{ stream, expected: 'any', ids: first }]);
      const got = await appendBatch(store, [
        { stream, expected: 'no_stream', ids: ids(1) },
        { stream: randomStream(), expected: 'any', ids: [first[0]!] },
      ]);
      assert.deepEqual(got, [wrong(2), exists]);
      assert.equal(await store.headPosition(), 2);
      assert.deepEqual(await appendBatch(store, []), []);
    } finally {
      await store.close();
    }
  });

  it('writes a group whose every append passes in one go: positions, versions, hashes', async () => {
    const store = await ctx.openSharedStore();
    try {
      const [s1, s2] = [randomStream(), randomStream()];
      await appendBatch(store, [{ stream: s2, expected: 'any', ids: ids(2) }]);
      const head = await store.headPosition();
      const got = await appendBatch(store, [
        { stream: s1, expected: 'no_stream', ids: ids(2) },
        { stream: s2, expected: '2', ids: ids(1) },
        { stream: s1, expected: '2', ids: ids(3) }, // counts the first append of the call
        { stream: s2, expected: 'stream_exists', ids: ids(1) },
        { stream: s1, expected: 'any', ids: ids(1) },
      ]);
      assert.deepEqual(got, [
        ok(2, head + 1, head + 2),
        ok(3, head + 3, head + 3),
        ok(5, head + 4, head + 6),
        ok(4, head + 7, head + 7),
        ok(6, head + 8, head + 8),
      ]);
      assert.equal(await store.headPosition(), head + 8);
      const r = await store.pool.query<{
        position: string;
        stream: string;
        version: number;
        stream_hash: string;
      }>(
        `SELECT position, stream, version, stream_hash FROM ${quoteSchema(store.schema)}.events
          WHERE position > $1 ORDER BY position`,
        [head],
      );
      assert.deepEqual(
        r.rows.map((e) => `${e.stream === s1 ? 's1' : 's2'}@${e.version}`),
        ['s1@1', 's1@2', 's2@3', 's1@3', 's1@4', 's1@5', 's2@4', 's1@6'],
      );
      for (const e of r.rows) assert.equal(Number(e.stream_hash), streamHash(e.stream));
    } finally {
      await store.close();
    }
  });

  it('decides any group as the appends one after another would (property)', async () => {
    const store = await ctx.openSharedStore();
    try {
      const stored = new Map<string, string[]>(); // stream -> its ids, in version order
      const storedIds = new Set<string>();
      const pool = ids(4); // ids that appends may share, within a call and across calls
      const streams = [randomStream(), randomStream(), randomStream()];
      const expectations = ['any', 'no_stream', 'stream_exists', '0', '1', '2', '3', '5'];
      const appendArb = fc.record({
        stream: fc.constantFrom(...streams),
        // Mostly 'any', so that many groups pass whole (one statement) and some do not (the loop).
        expected: fc.oneof({ weight: 4, arbitrary: fc.constant('any') }, fc.constantFrom(...expectations)),
        // Mostly fresh ids; sometimes one shared by appends of the call (`call-*`, new to the log) or
        // across calls (`pool`, stored by an earlier call once written).
        ids: fc.uniqueArray(
          fc.oneof(
            { weight: 4, arbitrary: fc.constant('fresh') },
            fc.constantFrom('call-a', 'call-b'),
            fc.constantFrom(...pool),
          ),
          { minLength: 1, maxLength: 3, selector: (x) => (x === 'fresh' ? randomUUID() : x) },
        ),
      });
      await fc.assert(
        fc.asyncProperty(fc.array(appendArb, { minLength: 1, maxLength: 6 }), async (raw) => {
          const shared = new Map([
            ['call-a', randomUUID()],
            ['call-b', randomUUID()],
          ]);
          const appends: Append[] = raw.map((a) => ({
            ...a,
            ids: a.ids.map((x) => (x === 'fresh' ? randomUUID() : (shared.get(x) ?? x))),
          }));
          // The model: each append decided in order, against the log and the earlier appends.
          let head = await store.headPosition();
          const written = new Set<string>();
          const expected: Outcome[] = appends.map((a) => {
            if (a.ids.some((id) => storedIds.has(id) || written.has(id))) return exists;
            const current = stored.get(a.stream)?.length ?? 0;
            if (!meets(a.expected, current)) return wrong(current);
            for (const id of a.ids) written.add(id);
            stored.set(a.stream, [...(stored.get(a.stream) ?? []), ...a.ids]);
            const first = head + 1;
            head += a.ids.length;
            return ok(current + a.ids.length, first, head);
          });
          assert.deepEqual(await appendBatch(store, appends), expected);
          for (const id of written) storedIds.add(id);
          assert.equal(await store.headPosition(), head);
        }),
        { numRuns: 100 },
      );
      await assertLogHolds(store, streams, stored);
    } finally {
      await store.close();
    }
  });

  it('refuses arrays that do not add up', async () => {
    const store = await ctx.openSharedStore();
    try {
      await assert.rejects(
        store.pool.query(
          `SELECT * FROM ${quoteSchema(store.schema)}.append_batch($1::text[], $2::text[], $3::int[], $4::uuid[], $5::text[], $6::text[], $7::text[])`,
          [['s'], ['any'], [2], [randomUUID()], ['t'], ['{}'], ['{}']],
        ),
        /append_batch: counts add up to 2 events, got 1 ids/,
      );
      assert.equal(await store.headPosition(), 0);
    } finally {
      await store.close();
    }
  });
});

/** Appends `rest` while `first` is in flight, so the store sends `rest` together in one statement. */
async function grouped(
  store: PostgresEventStore,
  calls: [string, NewEvent[], { expectedVersion?: number | 'any' | 'no_stream' | 'stream_exists' }?][],
): Promise<PromiseSettledResult<AppendResult>[]> {
  return Promise.allSettled([
    store.append(randomStream('lead'), [{ type: 'lead', data: null }]),
    ...calls.map(([stream, events, options]) => store.append(stream, events, options)),
  ]).then((r) => r.slice(1));
}

function value(r: PromiseSettledResult<AppendResult> | undefined): AppendResult {
  if (r?.status !== 'fulfilled') assert.fail(r ? String(r.reason) : 'no result');
  return r.value;
}

function reason(r: PromiseSettledResult<AppendResult> | undefined): unknown {
  if (r?.status !== 'rejected') assert.fail('expected a rejection');
  return r.reason;
}

/** Calls `append_event` directly: one event, its id, to `stream`. */
async function appendEvent(
  store: PostgresEventStore,
  stream: string,
  expected: string,
  id: string,
): Promise<string> {
  const r = await store.pool.query<{ r: string }>(
    `SELECT ${quoteSchema(store.schema)}.append_event($1, $2, $3, 't', $4, '{}') AS r`,
    [stream, expected, id, JSON.stringify({ id })],
  );
  return r.rows[0]!.r;
}

describe('append_event: one event appended alone', { skip: ctx.skip }, () => {
  it('decides each call as append_one would: ok, exists or the wrong expected version, gap-free (property)', async () => {
    const store = await ctx.openSharedStore();
    try {
      const stored = new Map<string, string[]>(); // stream -> its ids, in version order
      const storedIds = new Set<string>();
      const streams = [randomStream(), randomStream()];
      const reusable = ids(3);
      const step = fc.record({
        stream: fc.constantFrom(...streams),
        expected: fc.oneof(
          { weight: 3, arbitrary: fc.constant('any') },
          fc.constantFrom('no_stream', 'stream_exists', '0', '1', '2', '4'),
        ),
        id: fc.oneof({ weight: 3, arbitrary: fc.constant('fresh') }, fc.constantFrom(...reusable)),
      });
      await fc.assert(
        fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 8 }), async (steps) => {
          for (const { stream, expected, id: which } of steps) {
            const id = which === 'fresh' ? randomUUID() : which;
            const head = await store.headPosition();
            const current = stored.get(stream)?.length ?? 0;
            const want = storedIds.has(id)
              ? 'exists'
              : meets(expected, current)
                ? `ok ${current + 1} ${head + 1}`
                : `wrong_expected_version ${current}`;
            assert.equal(await appendEvent(store, stream, expected, id), want);
            if (want.startsWith('ok')) {
              storedIds.add(id);
              stored.set(stream, [...(stored.get(stream) ?? []), id]);
            }
            assert.equal(await store.headPosition(), want.startsWith('ok') ? head + 1 : head);
          }
        }),
        { numRuns: 60 },
      );
      await assertLogHolds(store, streams, stored);
    } finally {
      await store.close();
    }
  });

  it("writes the event's columns as a grouped append does, the stream's hash included", async () => {
    const store = await ctx.openSharedStore();
    try {
      const names = [
        `${randomStream()}-ascii`,
        `${randomStream()}-é`,
        `${randomStream()}-日本`,
        `${randomStream()}-🙂`,
      ];
      for (const stream of names) {
        const result = await store.append(stream, [
          { type: 'order.placed', data: { n: 1 }, metadata: { m: 'x' } },
        ]);
        assert.equal(result.version, 1);
        assert.equal(result.firstPosition, result.lastPosition);
        const r = await store.pool.query<{
          stream_hash: string;
          data: unknown;
          metadata: unknown;
          type: string;
        }>(
          `SELECT stream_hash, data, metadata, type FROM ${quoteSchema(store.schema)}.events WHERE position = $1`,
          [result.lastPosition],
        );
        assert.deepEqual(r.rows[0], {
          stream_hash: String(streamHash(stream)),
          data: { n: 1 },
          metadata: { m: 'x' },
          type: 'order.placed',
        });
      }
    } finally {
      await store.close();
    }
  });
});

describe('grouped appends through the store', { skip: ctx.skip }, () => {
  it('the same append twice in one group: the second is a duplicate with the first result', async () => {
    const store = await ctx.openSharedStore();
    try {
      const stream = randomStream();
      const events: NewEvent[] = [
        { id: randomUUID(), type: 't', data: { n: 1 } },
        { id: randomUUID(), type: 't', data: { n: 2 } },
      ];
      const [a, b, c] = await grouped(store, [
        [stream, events, { expectedVersion: 'no_stream' }],
        [stream, structuredClone(events), { expectedVersion: 'no_stream' }],
        [randomStream(), [{ type: 'other', data: null }]],
      ]);
      const first = value(a);
      assert.equal(first.duplicate, false);
      assert.deepEqual(value(b), { ...first, duplicate: true });
      assert.equal(value(c).firstPosition, first.lastPosition + 1);
      assert.equal(await store.streamVersion(stream), 2);
    } finally {
      await store.close();
    }
  });

  it('an idempotency conflict or a stale version in a group fails only its own append', async () => {
    const store = await ctx.openSharedStore();
    try {
      const [s1, s2] = [randomStream(), randomStream()];
      const id = randomUUID();
      const [a, b, c, d, e] = await grouped(store, [
        [s1, [{ id, type: 't', data: 1 }]],
        [s2, [{ id, type: 't', data: 2 }]], // same id, other content and stream: conflict
        [s1, [{ type: 't', data: 3 }], { expectedVersion: 1 }], // sees the first: ok
        [s1, [{ type: 't', data: 4 }], { expectedVersion: 1 }], // stale: actual 2
        [s2, [{ type: 't', data: 5 }], { expectedVersion: 'no_stream' }], // s2 got nothing: ok
      ]);
      assert.equal(value(a).version, 1);
      const conflict = reason(b);
      assert.ok(isIdemError(conflict, 'idempotency_conflict'), String(conflict));
      assert.equal(value(c).version, 2);
      const stale = reason(d);
      assert.ok(stale instanceof WrongExpectedVersionError);
      assert.equal(stale.actual, 2);
      assert.equal(value(e).version, 1);
      const positions = [a, c, e].map((r) => value(r).firstPosition);
      assert.deepEqual(
        positions,
        [...positions].sort((x, y) => x - y),
      );
      assert.equal(await store.headPosition(), 4);
    } finally {
      await store.close();
    }
  });
});

describe("appends and the store's pool", { skip: ctx.skip }, () => {
  /** Counts the pool's checkouts and releases from now on. */
  function poolEvents(pool: pg.Pool): { acquire: number; release: number } {
    const seen = { acquire: 0, release: 0 };
    pool.on('acquire', () => seen.acquire++);
    pool.on('release', () => seen.release++);
    return seen;
  }
  const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

  it('a caller appending (or reading and appending) in a loop checks a connection out once and gives it back when it stops', async () => {
    const store = await ctx.openStore({ poolSize: 4 });
    try {
      const stream = randomStream();
      await store.append(stream, [{ type: 't', data: 0 }]);
      await nextTurn();
      const seen = poolEvents(store.pool);
      for (let i = 1; i <= 30; i++) {
        const r = await store.append(stream, [{ type: 't', data: i }], { expectedVersion: i });
        assert.equal(r.version, i + 1);
      }
      assert.equal(seen.acquire, 1, 'one checkout for 30 appends in a row');
      await nextTurn();
      assert.equal(seen.release, 1, 'given back a turn of the event loop after the last append');
      assert.equal(store.pool.idleCount, store.pool.totalCount);
      // Appends of several events (append_one) and concurrent groups (append_batch) keep it too.
      await store.append(stream, [
        { type: 't', data: 'a' },
        { type: 't', data: 'b' },
      ]);
      await Promise.all(
        Array.from({ length: 8 }, (_, i) => store.append(randomStream(), [{ type: 't', data: i }])),
      );
      await nextTurn();
      assert.equal(seen.acquire, seen.release);
      assert.equal(store.pool.idleCount, store.pool.totalCount);
      assert.equal(await store.headPosition(), 41);
      // A command handler's loop: read the stream, decide, append; one checkout for all of it.
      await nextTurn();
      const before = seen.acquire;
      for (let i = 0; i < 10; i++) {
        let version = 0;
        for await (const e of store.readStream(stream)) version = e.version;
        await store.append(stream, [{ type: 't', data: version }], { expectedVersion: version });
      }
      assert.equal(seen.acquire - before, 1, 'one checkout for 10 reads and appends in a row');
      await nextTurn();
      assert.equal(seen.acquire, seen.release);
      assert.equal(await store.streamVersion(stream), 43);
    } finally {
      await store.close();
    }
  });

  it('a pool of one connection serves appends, reads and other queries in any order', async () => {
    const store = await ctx.openStore({ poolSize: 1 });
    try {
      const stream = randomStream();
      for (let i = 0; i < 20; i++) {
        const [appended, one] = await Promise.all([
          store.append(stream, [{ type: 't', data: i }]),
          store.pool.query<{ n: number }>('SELECT 1 AS n'),
          store.append(randomStream(), [{ type: 'other', data: i }]),
        ]);
        assert.equal(one.rows[0]!.n, 1);
        const read = [];
        for await (const e of store.readStream(stream)) read.push(e.data);
        assert.equal(read.length, appended.version);
      }
      assert.equal(await store.streamVersion(stream), 20);
    } finally {
      await store.close();
    }
  });

  it('a connection whose append statement failed is not used again', async () => {
    const store = await ctx.openStore({ poolSize: 2 });
    try {
      await store.append(randomStream(), [{ type: 't', data: 1 }]);
      const schema = quoteSchema(store.schema);
      await store.pool.query(`ALTER FUNCTION ${schema}.append_event RENAME TO append_event_gone`);
      await nextTurn();
      const before = store.pool.totalCount;
      const removed = once(store.pool, 'remove');
      await assert.rejects(store.append(randomStream(), [{ type: 't', data: 2 }]), /append_event/);
      assert.equal(
        store.pool.totalCount,
        before - 1,
        'the failed statement took its connection out of the pool',
      );
      await removed;
      await store.pool.query(`ALTER FUNCTION ${schema}.append_event_gone RENAME TO append_event`);
      const r = await store.append(randomStream(), [{ type: 't', data: 3 }]);
      assert.equal(r.firstPosition, 2);
    } finally {
      await store.close();
    }
  });
});

describe('append_batch migration', { skip: ctx.skip }, () => {
  it('a schema made by the first release is upgraded on open and keeps appending where it was', async () => {
    const schema = randomIdentifier('s');
    const pool = new pg.Pool({ connectionString: ctx.db.connectionString, max: 2 });
    try {
      const old = STORE_MIGRATIONS.filter((m) => m.version <= 2);
      assert.equal(await runPgMigrations({ pool, schema }, old), 2);
      const s = quoteSchema(schema);
      const stream = randomStream();
      await pool.query(
        `SELECT * FROM ${s}.append_batch($1::text[], $2::text[], $3::int[], $4::uuid[], $5::text[], $6::text[], $7::text[])`,
        [[stream], ['no_stream'], [2], ids(2), ['t', 't'], ['1', '2'], ['{}', '{}']],
      );
      const store = await openPostgresStore({ pool, schema });
      try {
        const r = await pool.query<{ v: number }>(
          `SELECT max(version)::int AS v FROM ${s}.schema_migrations`,
        );
        assert.equal(r.rows[0]?.v, Math.max(...STORE_MIGRATIONS.map((m) => m.version)));
        const next = await store.append(stream, [{ type: 't', data: 3 }], { expectedVersion: 2 });
        assert.deepEqual([next.version, next.firstPosition, next.lastPosition], [3, 3, 3]);
        await assert.rejects(
          store.append(stream, [{ type: 't', data: 4 }], { expectedVersion: 2 }),
          WrongExpectedVersionError,
        );
      } finally {
        await store.close();
      }
    } finally {
      await pool.end();
    }
  });
});
