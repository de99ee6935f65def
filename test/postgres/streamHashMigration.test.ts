// The stream hash passed by the appending process: the migration that turns the generated column into
// a plain one keeps every stored row's hash, and appends through the new and the earlier function
// signatures write the hash JavaScript computes.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import pg from 'pg';
import { streamHash, streamPartition } from '../../src/core/streamHash.js';
import { validateStreamName } from '../../src/core/validation.js';
import { openPostgresStore } from '../../src/postgres/index.js';
import { runPgMigrations } from '../../src/postgres/migrations.js';
import { STORE_MIGRATIONS } from '../../src/postgres/postgresStore.js';
import { quoteSchema } from '../../src/postgres/schemaName.js';
import { randomIdentifier } from '../support/names.js';
import { collect } from '../store/suite/context.js';
import { pgTestContext } from './pgFixtures.js';

const ctx = await pgTestContext();

const PREVIOUS = 10;
const PARTITIONS = 8;

/** Stream names of any Unicode (BMP and beyond), as the store accepts them; a fixed seed. */
function unicodeStreams(count: number): string[] {
  const valid = (s: string): boolean => {
    try {
      validateStreamName(s);
      return true;
    } catch {
      return false;
    }
  };
  const names = fc.sample(fc.string({ unit: 'binary', minLength: 1, maxLength: 24 }).filter(valid), {
    numRuns: count * 2,
    seed: 20,
  });
  return [...new Set(names)].slice(0, count);
}

describe('stream hash passed by the caller (PostgreSQL migration 11)', { skip: ctx.skip }, () => {
  it('a store made at the previous schema keeps its hashes, equal to streamHash, and its partitions read back', async () => {
    const schema = randomIdentifier('s');
    const s = quoteSchema(schema);
    const pool = new pg.Pool({ connectionString: ctx.db.connectionString, max: 3 });
    try {
      const older = STORE_MIGRATIONS.filter((m) => m.version <= PREVIOUS);
      assert.equal(await runPgMigrations({ pool, schema }, older), PREVIOUS);
      const streams = unicodeStreams(60);
      assert.ok(streams.length >= 50, `${streams.length} distinct names`);
      assert.ok(
        streams.some((n) => [...n].some((c) => c.codePointAt(0)! > 0xffff)),
        'a name beyond the BMP',
      );
      // Appended as the previous release does: the earlier signatures, the hash left to the column.
      const half = streams.length / 2;
      for (const stream of streams.slice(0, half)) {
        await pool.query(
          `SELECT * FROM ${s}.append_one($1::text, $2::text, $3::uuid[], $4::text[], $5::text[], $6::text[])`,
          [stream, 'any', [randomUUID(), randomUUID()], ['t', 't'], ['1', '2'], ['{}', '{}']],
        );
      }
      const rest = streams.slice(half);
      await pool.query(
        `SELECT * FROM ${s}.append_batch($1::text[], $2::text[], $3::int[], $4::uuid[], $5::text[], $6::text[], $7::text[])`,
        [
          rest,
          rest.map(() => 'any'),
          rest.map(() => 1),
          rest.map(() => randomUUID()),
          rest.map(() => 't'),
          rest.map(() => '1'),
          rest.map(() => '{}'),
        ],
      );
      const stored = async (): Promise<Map<string, string[]>> => {
        const r = await pool.query<{ stream: string; h: string }>(
          `SELECT stream, stream_hash::text AS h FROM ${s}.events ORDER BY position`,
        );
        const out = new Map<string, string[]>();
        for (const row of r.rows) out.set(row.stream, [...(out.get(row.stream) ?? []), row.h]);
        return out;
      };
      const before = await stored();

      const store = await openPostgresStore({ pool, schema });
      try {
        const generated = await pool.query<{ g: string }>(
          `SELECT attgenerated AS g FROM pg_attribute WHERE attrelid = $1::regclass AND attname = 'stream_hash'`,
          [`${s}.events`],
        );
        assert.equal(generated.rows[0]?.g, '', 'a plain column now');
        // Every old row kept its hash, and that hash is the JavaScript one.
        assert.deepEqual(await stored(), before);
        for (const [stream, hashes] of before) {
          for (const h of hashes) assert.equal(Number(h), streamHash(stream), stream);
        }

        // New appends (one event, several, and grouped concurrent appends) pass the hash; an append
        // through the earlier signature (a process not yet upgraded) computes the same.
        await store.append(streams[0]!, [{ type: 't', data: 3 }]);
        await store.append(streams[1]!, [
          { type: 't', data: 3 },
          { type: 't', data: 4 },
        ]);
        await Promise.all(rest.map((stream) => store.append(stream, [{ type: 't', data: 2 }])));
        await pool.query(
          `SELECT * FROM ${s}.append_one($1::text, $2::text, $3::uuid[], $4::text[], $5::text[], $6::text[])`,
          [streams[2], 'any', [randomUUID()], ['t'], ['5'], ['{}']],
        );
        const after = await stored();
        for (const [stream, hashes] of after) {
          for (const h of hashes) assert.equal(Number(h), streamHash(stream), stream);
        }

        // Each partition reads exactly its streams' events, old and new.
        const all = await collect(store.readAll());
        let total = 0;
        for (let index = 0; index < PARTITIONS; index++) {
          const part = await collect(store.readAll({ filter: { partition: { count: PARTITIONS, index } } }));
          const expected = all.filter((e) => streamPartition(e.stream, PARTITIONS) === index);
          assert.deepEqual(
            part.map((e) => e.position),
            expected.map((e) => e.position),
            `partition ${index}`,
          );
          total += part.length;
        }
        assert.equal(total, all.length);
      } finally {
        await store.close();
      }
    } finally {
      await pool.end();
    }
  });
});
