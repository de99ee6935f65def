// Child process of the catch-up scenario: reads a store from position 0 and reports its rate and its
// own peak RSS over IPC. Run by `fork` (see scenarios/catchUp.ts); not a public entry point.
//
// Arguments: mode, store path, expected events, and for `group` the partition count. Modes: `raw`
// iterates the table; `consumer` runs one consumer without partitions; `group` runs one member of a
// consumer group, which holds every partition (the only member).
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { createConsumer } from '../consumer/index.js';
import { openSqliteStore, sqliteTarget } from '../sqlite/index.js';
import { waitForPosition } from './consumerRun.js';

export type CatchUpMode = 'raw' | 'consumer' | 'group';

export interface CatchUpResult {
  /** Events handled (rows parsed, for `raw`). */
  events: number;
  /** Events read from the store: delivered to the consumer, all partitions together (rows, for `raw`). */
  read: number;
  seconds: number;
  /** RSS after opening, before reading. */
  startRssMb: number;
  /** RSS when a tenth of the events were read (flat memory means the peak stays near it). */
  tenthRssMb: number;
  /** The process's peak RSS (getrusage maxrss). */
  peakRssMb: number;
  /**
   * Heap in use right after a full garbage collection: before reading, at a tenth of the events, and
   * after the last one. What the reader retains; flat means memory does not grow with the log (the
   * RSS above it is garbage V8 has not collected yet, and V8's own reserve). 0 without --expose-gc.
   */
  startHeapMb: number;
  tenthHeapMb: number;
  endHeapMb: number;
}

const mb = (bytes: number): number => Math.round((bytes / 2 ** 20) * 10) / 10;

/** Heap used after a full collection (the parent forks this child with --expose-gc). */
function retainedHeap(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) return 0;
  gc();
  return process.memoryUsage().heapUsed;
}

const heap = { start: 0, tenth: 0, end: 0 };
/** RSS when a tenth of the events were read. */
let tenthRss = 0;

async function run(
  mode: CatchUpMode,
  path: string,
  expected: number,
  partitions: number,
): Promise<CatchUpResult> {
  const progress = (count: number): void => {
    if (tenthRss === 0 && count >= expected / 10) {
      // RSS first: the collection below must not lower the figure it reports.
      tenthRss = process.memoryUsage.rss();
      heap.tenth = retainedHeap();
    }
  };
  if (mode === 'raw') {
    const db = new Database(path, { readonly: true });
    heap.start = retainedHeap();
    const startRss = process.memoryUsage.rss();
    const t0 = performance.now();
    let count = 0;
    for (const r of db.prepare('SELECT * FROM idem_events ORDER BY position').iterate() as Iterable<{
      data: string;
      metadata: string;
    }>) {
      JSON.parse(r.data);
      JSON.parse(r.metadata);
      progress(++count);
    }
    const seconds = (performance.now() - t0) / 1000;
    heap.end = retainedHeap();
    db.close();
    return result(count, count, seconds, startRss, tenthRss);
  }
  if (mode === 'group') return runGroup(path, expected, partitions, progress);
  const store = await openSqliteStore({ path });
  try {
    const target = sqliteTarget(join(path, '..', 'catchup-target.db'));
    let count = 0;
    const consumer = createConsumer({
      name: 'catchup_consumer_v1',
      source: store,
      target,
      guard: 'entity-version',
      handle: () => void progress(++count),
    });
    heap.start = retainedHeap();
    const startRss = process.memoryUsage.rss();
    const t0 = performance.now();
    await consumer.start();
    await waitForPosition(consumer, expected);
    const seconds = (performance.now() - t0) / 1000;
    // Still running (the subscription and target open): what a caught-up consumer keeps.
    heap.end = retainedHeap();
    await consumer.stop();
    await target.close();
    return result(count, consumer.metrics().delivered, seconds, startRss, tenthRss);
  } finally {
    await store.close();
  }
}

/**
 * The same consumer with `partitions` partitions, one member holding them all: each partition
 * reads its own events (the store's partition index) and they run concurrently, their SQLite target
 * transactions one at a time. Timed from `start()` (which takes every partition, and whose first read
 * of each creates the store's partition index if missing) until every partition has acknowledged its
 * last event.
 */
async function runGroup(
  path: string,
  expected: number,
  partitions: number,
  progress: (count: number) => void,
): Promise<CatchUpResult> {
  const last = lastPositions(path, partitions);
  const store = await openSqliteStore({ path });
  try {
    const target = sqliteTarget(join(path, '..', 'catchup-group-target.db'));
    let count = 0;
    const consumer = createConsumer({
      name: 'catchup_group_v1',
      source: store,
      target,
      guard: 'entity-version',
      partitions,
      handle: () => void progress(++count),
    });
    heap.start = retainedHeap();
    const startRss = process.memoryUsage.rss();
    const t0 = performance.now();
    await consumer.start();
    for (;;) {
      const s = consumer.status();
      if (s.state === 'failed' || s.state === 'stopped')
        throw new Error(`group ${s.state} at ${s.position}: ${s.lastError?.message ?? 'no error'}`);
      const held = new Map((s.partitions ?? []).map((p) => [p.index, p.position]));
      if ([...last].every(([index, position]) => (held.get(index) ?? -1) >= position)) break;
      await delay(2);
    }
    const seconds = (performance.now() - t0) / 1000;
    heap.end = retainedHeap();
    await consumer.stop();
    await target.close();
    if (count !== expected) throw new Error(`the group handled ${count} of ${expected} events`);
    return result(count, consumer.metrics().delivered, seconds, startRss, tenthRss);
  } finally {
    await store.close();
  }
}

/** Each partition's last event (read before the timing starts). */
function lastPositions(path: string, partitions: number): Map<number, number> {
  const db = new Database(path, { readonly: true });
  try {
    const rows = db
      .prepare('SELECT stream_hash % ? AS i, max(position) AS p FROM idem_events GROUP BY 1')
      .all(partitions) as { i: number; p: number }[];
    return new Map(rows.map((r) => [r.i, r.p]));
  } finally {
    db.close();
  }
}

function result(
  events: number,
  read: number,
  seconds: number,
  startRss: number,
  tenth: number,
): CatchUpResult {
  return {
    events,
    read,
    seconds,
    startRssMb: mb(startRss),
    tenthRssMb: mb(tenth),
    peakRssMb: mb(process.resourceUsage().maxRSS * 1024),
    startHeapMb: mb(heap.start),
    tenthHeapMb: mb(heap.tenth),
    endHeapMb: mb(heap.end),
  };
}

const [mode, path, expected, partitions] = process.argv.slice(2);
run(mode as CatchUpMode, path!, Number(expected), Number(partitions ?? 0)).then(
  (r) => process.send?.({ ok: true, result: r }),
  (err: unknown) =>
    process.send?.({ ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) }),
);
