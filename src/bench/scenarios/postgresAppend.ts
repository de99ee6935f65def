import { openPostgresStore } from '../../postgres/index.js';
import { baselineRow, inRounds, row, timed, type Timed } from '../measure.js';
import { RawPostgresEvents } from '../rawPostgres.js';
import { flushDirtyPages, loadPgModule } from '../resources.js';
import type { Scenario, ScenarioContext } from '../types.js';
import { rawRow, type IdKind } from '../workload.js';
import { appendInCalls, appendShapes, appendSizes as sizes } from './sqliteAppend.js';

const NAME = 'postgres-append';
/** How many times `--rounds` the one-event sequential shape and its raw baseline run. */
const SINGLE_ROUNDS = 3;

/**
 * Raw `pg` writing `n` rows, `perStatement` per INSERT, into a new database. `ids` and `perStream` as
 * `rawRow`: the default (v4 ids, each row to the next stream) is the baseline of earlier runs;
 * `'v7'` with `perStream` 100 writes the very rows that the 100-event calls write.
 */
async function rawWrite(
  ctx: ScenarioContext,
  settle: Settle,
  n: number,
  perStatement: number,
  ids: IdKind,
  perStream: number,
): Promise<Timed> {
  const raw = await RawPostgresEvents.open(await loadPgModule(), await ctx.postgresDatabase());
  const rows = Array.from({ length: n }, (_, i) => rawRow(i, ids, perStream));
  try {
    await settle();
    return await timed(n, async () => {
      for (let i = 0; i < n; i += perStatement) await raw.write(rows.slice(i, i + perStatement));
    });
  } finally {
    await raw.close();
  }
}

function rawShape(perStatement: number, ids: IdKind = 'v4', perStream = 1): string {
  const shape =
    perStatement === 1 ? 'raw pg, single-row INSERTs' : `raw pg, ${perStatement}-row multi-VALUES INSERTs`;
  return ids === 'v7'
    ? `${shape}, UUIDv7 ids, ${perStream} rows per stream (the 100-event calls' rows)`
    : shape;
}

/** The target "at least `ratio` times the raw baseline measured in the same run". */
function atLeast(measured: Timed, raw: Timed, ratio: number): { text: string; met: boolean } {
  return { text: `>= ${ratio}x raw`, met: measured.eventsPerSec >= ratio * raw.eventsPerSec };
}

/** `total` events appended to a store in a new database as `appendInCalls` says. */
async function storeAppends(
  ctx: ScenarioContext,
  settle: Settle,
  total: number,
  perCall: number,
  callers: number,
  ids: IdKind,
): Promise<Timed> {
  const store = await openPostgresStore({ connectionString: await ctx.postgresDatabase() });
  try {
    await settle();
    return await appendInCalls(store, total, perCall, callers, ids);
  } finally {
    await store.close();
  }
}

type Settle = () => Promise<void>;

/**
 * A `CHECKPOINT` and the OS's `sync`, off the clock after a shape's database is made (and its store
 * opened) and before its clock starts: a round writes some 270,000 rows, and each shape first
 * creates a database (and the store its schema), so without it the server's checkpoints and the
 * kernel's writeback of those pages land in the timed appends, and the shapes of one event per call
 * (1,000 events, about half a second) spread by more than 2x from round to round.
 */
async function checkpointer(ctx: ScenarioContext): Promise<Settle> {
  const url = await ctx.postgresDatabase();
  const pg = await loadPgModule();
  let mayCheckpoint = true;
  return async () => {
    if (mayCheckpoint) {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query('CHECKPOINT');
      } catch (err) {
        // CHECKPOINT needs a superuser or the pg_checkpoint role (PostgreSQL 15): without it the
        // shapes are measured after `sync` alone.
        if ((err as { code?: string }).code !== '42501') throw err;
        mayCheckpoint = false;
        ctx.log(`${NAME}: this role may not run CHECKPOINT; shapes start after sync only`);
      } finally {
        await client.end();
      }
    }
    await flushDirtyPages();
  };
}

/** Scenario 2: appends to the PostgreSQL store, against raw `pg` INSERTs of the same rows. */
export const postgresAppend: Scenario = {
  name: NAME,
  description: 'append to the PostgreSQL store vs raw pg INSERTs',
  needs: ['postgres'],
  async run(ctx) {
    const n = sizes(ctx);
    const settle = await checkpointer(ctx);
    // Ids: the idem side uses UUIDv7 ids, made as idem makes them when a caller gives none (and as
    // the docs recommend for callers' ids); random v4 ids put every insert at a random place in the
    // id index (more pages touched and, after each checkpoint, more full-page images in the WAL).
    // The v4 rows (the shape of earlier runs) stay for comparison, against the v4 raw baseline.
    // Every shape runs ctx.rounds times, interleaved after a warm-up; rows give the median round.
    // The one-event sequential pair runs first, alone, in three times as many rounds: its rounds
    // are short (1,000 calls, half a second), each waits on one flush per call, and with three
    // rounds the same code read 0.50x to 1.00x raw from run to run on one machine. (`--quick`: one.)
    const log = (message: string): void => ctx.log(`${NAME}: ${message}`);
    const { single: singleShape, ...storeShapes } = appendShapes(n, (total, perCall, callers, ids) =>
      storeAppends(ctx, settle, total, perCall, callers, ids),
    );
    const pair = await inRounds(
      ctx.quick ? ctx.rounds : ctx.rounds * SINGLE_ROUNDS,
      {
        rawSingle: {
          events: n.single,
          run: (e) => rawWrite(ctx, settle, e, 1, 'v4', 1),
          warmUpEvents: n.singleWarmUp,
        },
        single: singleShape,
      },
      { log },
    );
    const m = {
      ...pair,
      ...(await inRounds(
        ctx.rounds,
        {
          rawMulti: { events: n.batchedSequential, run: (e) => rawWrite(ctx, settle, e, 100, 'v4', 1) },
          rawSameRows: {
            events: n.batchedSequential,
            run: (e) => rawWrite(ctx, settle, e, 100, 'v7', 100),
          },
          ...storeShapes,
        },
        { log },
      )),
    };
    const single = baselineRow(NAME, rawShape(1), m.rawSingle);
    const multi = baselineRow(NAME, rawShape(100), m.rawMulti);
    const sameRows = baselineRow(NAME, rawShape(100, 'v7', 100), m.rawSameRows);
    return [
      single,
      multi,
      sameRows,
      row({
        scenario: NAME,
        shape: '1 event/call, sequential',
        measured: m.single,
        against: single,
        target: atLeast(m.single, m.rawSingle, 0.75),
      }),
      row({
        scenario: NAME,
        shape: '1 event/call, 16 concurrent callers',
        measured: m.concurrent,
        against: single,
        target: {
          text: '>= 10,000 events/s and >= 3x raw',
          met:
            m.concurrent.eventsPerSec >= 10_000 && m.concurrent.eventsPerSec >= 3 * m.rawSingle.eventsPerSec,
        },
      }),
      row({
        scenario: NAME,
        shape: '100 events/call, sequential',
        measured: m.sequential,
        against: sameRows,
        target: atLeast(m.sequential, m.rawSameRows, 0.75),
      }),
      row({
        scenario: NAME,
        shape: '100 events/call, 16 concurrent callers, random v4 ids',
        measured: m.batchedV4,
        against: multi,
        target: { text: '>= 40,000 events/s', met: m.batchedV4.eventsPerSec >= 40_000 },
      }),
      row({
        scenario: NAME,
        shape: '100 events/call, 16 concurrent callers, UUIDv7 ids',
        measured: m.batched,
        against: sameRows,
        target: { text: '>= 40,000 events/s', met: m.batched.eventsPerSec >= 40_000 },
      }),
    ];
  },
};
