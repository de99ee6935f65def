// Where a single PostgreSQL append's time goes, piece by piece (docs/postgres.md, "Where an append's
// time goes"): `node --import tsx bench/appendBreakdown.ts [postgres-url] [calls] [rounds]`.
// Creates a database, measures each piece `rounds` times interleaved, prints the medians, drops it.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { resolveStoreLimits } from '../src/core/limits.js';
import { uuidv7 } from '../src/core/uuid.js';
import { prepareAppend } from '../src/core/validation.js';
import { int4Array, textArray, uuidArray } from '../src/postgres/binaryArrays.js';
import { openPostgresStore } from '../src/postgres/index.js';
import { BenchResources } from '../src/bench/resources.js';

const [url = 'postgres://postgres@127.0.0.1:5432/postgres', callsArg = '400', roundsArg = '3'] =
  process.argv.slice(2);
const calls = Number(callsArg);
const rounds = Number(roundsArg);
const data = { invoiceId: 'inv-1', customer: 'customer-7919', amount: 101, currency: 'EUR' };
const metadata = { commandId: 'cmd-1' };
const dataJson = JSON.stringify(data);
const metadataJson = JSON.stringify(metadata);

const resources = new BenchResources(url);
const dbUrl = await resources.postgresDatabase(["track_functions = 'all'"]);
const times = new Map<string, number[]>();

/** Microseconds per call of `f`, over `n` calls, added to the piece's rounds. */
async function time(piece: string, n: number, f: (i: number) => unknown): Promise<void> {
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await f(i);
  const us = Number(process.hrtime.bigint() - start) / 1000 / n;
  times.set(piece, [...(times.get(piece) ?? []), us]);
}

try {
  const store = await openPostgresStore({ connectionString: dbUrl, schema: 'st' });
  // 100-event appends in a schema of their own, so that the functions' statistics are apart.
  const store100 = await openPostgresStore({ connectionString: dbUrl, schema: 'st100' });
  const client = new pg.Client({ connectionString: dbUrl });
  await client.connect();
  await client.query('CREATE SCHEMA raw; CREATE TABLE raw.events (LIKE st.events INCLUDING ALL)');
  let position = 0;
  let k = 0;
  const rawInsert = (): Promise<unknown> =>
    client.query({
      name: 'raw_insert',
      text: 'INSERT INTO raw.events VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
      values: [++position, randomUUID(), `raw-${position}`, 1, 't', dataJson, metadataJson, new Date()],
    });
  const arrays = (stream: string): Buffer[] => [
    textArray([stream]),
    textArray(['any']),
    int4Array([1]),
    uuidArray([uuidv7()]),
    textArray(['t']),
    textArray([dataJson]),
    textArray([metadataJson]),
  ];
  const hundred = Array.from({ length: 100 }, () => ({ type: 't', data, metadata }));
  let rawMultiSql = 'INSERT INTO raw.events VALUES ';
  rawMultiSql += Array.from(
    { length: 100 },
    (_, j) => `(${Array.from({ length: 8 }, (_, c) => `$${j * 8 + c + 1}`).join(', ')})`,
  ).join(', ');
  let rawStream = 0;
  const rawMultiInsert = (): Promise<unknown> => {
    const stream = `raw100-${++rawStream}`;
    const now = new Date();
    return client.query({
      name: 'raw_insert_100',
      text: rawMultiSql,
      values: Array.from({ length: 100 }, (_, j) => [
        ++position,
        uuidv7(),
        stream,
        j + 1,
        't',
        dataJson,
        metadataJson,
        now,
      ]).flat(),
    });
  };
  const limits = resolveStoreLimits({});
  for (let r = 0; r < rounds; r++) {
    await time('round trip (SELECT 1, named)', calls, () => client.query({ name: 'one', text: 'SELECT 1' }));
    await time('pool checkout + release', calls, async () => (await store.pool.connect()).release());
    await time('raw INSERT, autocommit', calls, rawInsert);
    await client.query('BEGIN');
    await time('raw INSERT inside an open transaction', calls, rawInsert);
    await client.query('COMMIT');
    await time('append_batch call with one append, autocommit', calls, () =>
      client.query({
        name: 'batch',
        text: 'SELECT * FROM st.append_batch($1::text[], $2::text[], $3::int[], $4::uuid[], $5::text[], $6::text[], $7::text[])',
        values: arrays(`batch-${++k}`),
      }),
    );
    const appendOne = (): pg.QueryConfig => ({
      name: 'append_one',
      text: 'SELECT * FROM st.append_one($1::text, $2::text, $3::uuid[], $4::text[], $5::text[], $6::text[])',
      values: [
        `one-${++k}`,
        'any',
        uuidArray([uuidv7()]),
        textArray(['t']),
        textArray([dataJson]),
        textArray([metadataJson]),
      ],
    });
    await time('append_one call, autocommit (raw pg client)', calls, () => client.query(appendOne()));
    await time('append_one call through the pool (pool.query)', calls, () => store.pool.query(appendOne()));
    const held = await store.pool.connect();
    await time('append_one call on one held pooled client', calls, () => held.query(appendOne()));
    held.release();
    await time('store.append of one event (append_one)', calls, (i) =>
      store.append(`store-${r}-${i}`, [{ type: 't', data, metadata }]),
    );
    await time('prepareAppend (validation, JSON text)', calls * 10, () =>
      prepareAppend('s-1', [{ type: 't', data, metadata }], limits),
    );
    await time('binary arrays of one event', calls * 10, () => arrays('s-1'));
    const calls100 = Math.max(1, calls >> 2);
    await time('100 events: raw 100-row INSERT, autocommit', calls100, rawMultiInsert);
    await client.query('BEGIN');
    await time('100 events: raw 100-row INSERT inside a transaction', calls100, rawMultiInsert);
    await client.query('COMMIT');
    await time('100 events: store.append (append_one)', calls100, (i) =>
      store100.append(`store100-${r}-${i}`, hundred),
    );
    await time('100 events: prepareAppend', calls100, () => prepareAppend('s-1', hundred, limits));
    const prepared = prepareAppend('s-1', hundred, limits);
    await time('100 events: binary arrays', calls100, () => [
      uuidArray(prepared.map((e) => e.id)),
      textArray(prepared.map((e) => e.type)),
      textArray(prepared.map((e) => e.dataJson)),
      textArray(prepared.map((e) => e.metadataJson)),
    ]);
  }
  // The functions' own time: statistics are flushed when a session ends.
  await client.end();
  await store.close();
  await store100.close();
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const stats = new pg.Client({ connectionString: dbUrl });
  await stats.connect();
  const functions = await stats.query<{ funcname: string; calls: string; total_time: number }>(
    `SELECT schemaname || '.' || funcname AS funcname, calls, total_time
       FROM pg_stat_user_functions ORDER BY funcname`,
  );
  await stats.end();
  for (const [piece, us] of times) {
    const sorted = [...us].sort((a, b) => a - b);
    const median = sorted[(sorted.length - 1) >> 1]!;
    console.log(
      `${piece.padEnd(48)} ${median.toFixed(1).padStart(9)} us  (rounds: ${us.map((u) => u.toFixed(0)).join(', ')})`,
    );
  }
  for (const f of functions.rows) {
    const us = (f.total_time * 1000) / Number(f.calls);
    console.log(
      `${`${f.funcname}: own time per call`.padEnd(48)} ${us.toFixed(1).padStart(9)} us  (${f.calls} calls)`,
    );
  }
} finally {
  await resources.cleanup();
}
