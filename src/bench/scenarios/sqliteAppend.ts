import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { EventStore } from '../../core/eventStore.js';
import { openSqliteStore } from '../../sqlite/index.js';
import { baselineRow, concurrently, inRounds, row, timed, type RoundShape, type Timed } from '../measure.js';
import { RawSqliteEvents } from '../rawSqlite.js';
import type { Scenario, ScenarioContext } from '../types.js';
import { newEvent, rawRow, streamOf, type IdKind } from '../workload.js';

const NAME = 'sqlite-append';

/**
 * Untimed calls of one event each before the rounds, for the one-event shapes and their raw
 * baselines (SQLite's and PostgreSQL's): a tenth of the shape (100 calls) left their code half
 * compiled by the JIT. In a new process on a 2-vCPU VM, rounds of 1,000 sequential PostgreSQL
 * appends to new stores took 751 and 767 µs per append (two runs) in the first round, 435 and 563
 * in the second and 306 to 473 in the next four; raw inserts 469 and 533 µs in the first round,
 * 244 to 391 later.
 */
const SINGLE_WARM_UP = 3_000;

/** The sizes of the four append shapes, shared by the SQLite and PostgreSQL append scenarios. */
export function appendSizes(ctx: ScenarioContext): {
  single: number;
  singleWarmUp: number;
  concurrent: number;
  batchedSequential: number;
  batched: number;
} {
  return {
    single: ctx.size(100, 1_000),
    singleWarmUp: ctx.size(100, SINGLE_WARM_UP),
    concurrent: ctx.size(1_600, 10_000, 16),
    batchedSequential: ctx.size(2_000, 20_000, 100),
    batched: ctx.size(9_600, 100_000, 1_600),
  };
}

/**
 * Raw better-sqlite3 writing `n` rows, `perTx` per transaction, into a new file. `ids` and
 * `perStream` as `rawRow`: the default (v4 ids, each row to the next stream) is the baseline of
 * earlier runs; `'v7'` with `perStream` 100 writes the very rows that the 100-event calls write.
 */
async function rawWrite(
  ctx: ScenarioContext,
  n: number,
  perTx: number,
  ids: IdKind,
  perStream: number,
): Promise<Timed> {
  const dir = await ctx.tempDir();
  const raw = new RawSqliteEvents(dir, 'raw');
  const all = Array.from({ length: n }, (_, i) => rawRow(i, ids, perStream));
  try {
    return await timed(n, () => {
      for (let i = 0; i < n; i += perTx) raw.write(all.slice(i, i + perTx));
    });
  } finally {
    raw.close();
    await rm(dir, { recursive: true, force: true });
  }
}

function rawShape(perTx: number, ids: IdKind = 'v4', perStream = 1): string {
  let shape = perTx === 1 ? 'raw better-sqlite3, 1 row/tx' : `raw better-sqlite3, ${perTx} rows/tx`;
  if (ids === 'v7' && perStream > 1)
    shape += `, UUIDv7 ids, ${perStream} rows per stream (the 100-event calls' rows)`;
  else if (ids === 'v7')
    shape += ', UUIDv7 ids, each row to the next stream (the rows of a group of 16 single-event calls)';
  return shape;
}

/** `total` events appended to a new store file (durability full) as `appendInCalls` says. */
async function storeAppends(
  ctx: ScenarioContext,
  total: number,
  perCall: number,
  callers: number,
  ids: IdKind,
): Promise<Timed> {
  const dir = await ctx.tempDir();
  const store = await openSqliteStore({ path: join(dir, 'idem.db'), durability: 'full' });
  try {
    return await appendInCalls(store, total, perCall, callers, ids);
  } finally {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * The idem shapes both append scenarios measure: 1 event per call sequentially and from 16 callers,
 * 100 events per call sequentially and from 16 callers (UUIDv7 ids, and random v4 ids). A
 * sequential caller waits for one commit per call, so its rate is bounded by the commit's latency;
 * the throughput targets are read on 100-event calls that arrive together. `appendTo` appends to a
 * new store as `appendInCalls` says.
 */
export function appendShapes(
  n: ReturnType<typeof appendSizes>,
  appendTo: (total: number, perCall: number, callers: number, ids: IdKind) => Promise<Timed>,
): Record<'single' | 'concurrent' | 'sequential' | 'batchedV4' | 'batched', RoundShape> {
  return {
    single: { events: n.single, run: (e) => appendTo(e, 1, 1, 'v7'), warmUpEvents: n.singleWarmUp },
    concurrent: { events: n.concurrent, run: (e) => appendTo(e, 1, 16, 'v7') },
    sequential: { events: n.batchedSequential, run: (e) => appendTo(e, 100, 1, 'v7') },
    batchedV4: { events: n.batched, run: (e) => appendTo(e, 100, 16, 'v4') },
    batched: { events: n.batched, run: (e) => appendTo(e, 100, 16, 'v7') },
  };
}

/**
 * Appends `total` events in calls of `perCall` events from `callers` concurrent callers, each call to
 * one stream (call c to `streamOf(c)`), with ids made as `ids` says.
 */
export async function appendInCalls(
  store: Pick<EventStore, 'append'>,
  total: number,
  perCall: number,
  callers: number,
  ids: IdKind = 'v4',
): Promise<Timed> {
  const calls = Math.ceil(total / perCall);
  const batches = Array.from({ length: calls }, (_, c) =>
    Array.from({ length: Math.min(perCall, total - c * perCall) }, (_, j) => newEvent(c * perCall + j, ids)),
  );
  return timed(total, () =>
    concurrently(callers, calls, async (c) => void (await store.append(streamOf(c), batches[c]!))),
  );
}

/** Scenario 1: appends to the embedded store with durability full, against raw better-sqlite3. */
export const sqliteAppend: Scenario = {
  name: NAME,
  description: 'append to the embedded SQLite store (durability full) vs raw better-sqlite3 inserts',
  needs: [],
  async run(ctx) {
    const n = appendSizes(ctx);
    // Ids: the idem side uses UUIDv7 ids, made as idem makes them when a caller gives none (and as
    // docs/concepts.md recommends for callers' ids); random v4 ids cost SQLite a random place in
    // the id index per insert. The v4 rows (the shape of earlier runs) stay for comparison.
    // Every shape runs ctx.rounds times, interleaved after a warm-up; rows give the median round.
    const m = await inRounds(
      ctx.rounds,
      {
        rawPerRow: {
          events: n.single,
          run: (e) => rawWrite(ctx, e, 1, 'v4', 1),
          warmUpEvents: n.singleWarmUp,
        },
        rawPerThousand: { events: n.batched, run: (e) => rawWrite(ctx, e, 1000, 'v4', 1) },
        rawSameRows: { events: n.batched, run: (e) => rawWrite(ctx, e, 1000, 'v7', 100) },
        // The ceiling of group commit with 16 single-event callers: a group holds at most 16
        // appends, so it can be no faster than raw transactions of those 16 rows (the ratio of this
        // baseline to the one-row one depends on how the disk's fsync compares with writing 16
        // rows' pages).
        rawPerSixteen: { events: n.concurrent, run: (e) => rawWrite(ctx, e, 16, 'v7', 1) },
        ...appendShapes(n, (total, perCall, callers, ids) => storeAppends(ctx, total, perCall, callers, ids)),
      },
      { log: (message) => ctx.log(`${NAME}: ${message}`) },
    );
    const perRow = baselineRow(NAME, rawShape(1), m.rawPerRow);
    const perThousand = baselineRow(NAME, rawShape(1000), m.rawPerThousand);
    const sameRows = baselineRow(NAME, rawShape(1000, 'v7', 100), m.rawSameRows);
    const perSixteen = baselineRow(NAME, rawShape(16, 'v7', 1), m.rawPerSixteen);
    return [
      perRow,
      perThousand,
      sameRows,
      perSixteen,
      row({ scenario: NAME, shape: '1 event/call, sequential', measured: m.single, against: perRow }),
      row({
        scenario: NAME,
        shape: '1 event/call, 16 concurrent callers',
        measured: m.concurrent,
        against: perRow,
        target: { text: '>= 10x 1 row/tx', met: m.concurrent.eventsPerSec >= 10 * m.rawPerRow.eventsPerSec },
      }),
      row({
        scenario: NAME,
        shape: '1 event/call, 16 concurrent callers, vs raw 16 rows/tx (its ceiling)',
        measured: m.concurrent,
        against: perSixteen,
      }),
      row({
        scenario: NAME,
        shape: '100 events/call, sequential',
        measured: m.sequential,
        against: sameRows,
      }),
      row({
        scenario: NAME,
        shape: '100 events/call, 16 concurrent callers, random v4 ids',
        measured: m.batchedV4,
        against: perThousand,
        target: { text: '>= 150,000 events/s', met: m.batchedV4.eventsPerSec >= 150_000 },
      }),
      row({
        scenario: NAME,
        shape: '100 events/call, 16 concurrent callers, UUIDv7 ids',
        measured: m.batched,
        against: sameRows,
        target: { text: '>= 150,000 events/s', met: m.batched.eventsPerSec >= 150_000 },
      }),
    ];
  },
};
