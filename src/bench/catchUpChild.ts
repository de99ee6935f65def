// Child process of the catch-up scenario: reads a store from position 0 and reports its rate and its
// own peak RSS over IPC. Run by `fork` (see scenarios/catchUp.ts); not a public entry point.
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createConsumer } from '../consumer/index.js';
import { openSqliteStore, sqliteTarget } from '../sqlite/index.js';
import { waitForPosition } from './consumerRun.js';

export type CatchUpMode = 'raw' | 'consumer';

export interface CatchUpResult {
  events: number;
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

async function run(mode: CatchUpMode, path: string, expected: number): Promise<CatchUpResult> {
  let tenthRss = 0;
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
    return result(count, seconds, startRss, tenthRss);
  }
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
    return result(count, seconds, startRss, tenthRss);
  } finally {
    await store.close();
  }
}

function result(events: number, seconds: number, startRss: number, tenthRss: number): CatchUpResult {
  return {
    events,
    seconds,
    startRssMb: mb(startRss),
    tenthRssMb: mb(tenthRss),
    peakRssMb: mb(process.resourceUsage().maxRSS * 1024),
    startHeapMb: mb(heap.start),
    tenthHeapMb: mb(heap.tenth),
    endHeapMb: mb(heap.end),
  };
}

const [mode, path, expected] = process.argv.slice(2);
run(mode as CatchUpMode, path!, Number(expected)).then(
  (r) => process.send?.({ ok: true, result: r }),
  (err: unknown) =>
    process.send?.({ ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) }),
);
