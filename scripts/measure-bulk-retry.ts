// Measures a bulk retry of many parked events on a real SQLite store: the time and the memory of
// `deadLetters.retryMany` (paged) and of the redelivery of every retried event to a subscriber that
// acknowledges them, against listing every dead letter at once (what an unpaged retry would hold).
// Run: node --expose-gc --import tsx scripts/measure-bulk-retry.ts [entities] [eventsPerEntity]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { openSqliteStore } from '../src/sqlite/sqliteStore.js';

const entities = Number(process.argv[2] ?? 20_000);
const perEntity = Number(process.argv[3] ?? 5);
const gc = (globalThis as { gc?: () => void }).gc;
const mb = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

/** Peak heap and RSS above the baseline taken (after a GC) when it starts. */
class Peak {
  private readonly heap0: number;
  private readonly rss0: number;
  heap = 0;
  rss = 0;
  constructor() {
    gc?.();
    this.heap0 = process.memoryUsage().heapUsed;
    this.rss0 = process.memoryUsage().rss;
  }
  sample(): void {
    const m = process.memoryUsage();
    this.heap = Math.max(this.heap, m.heapUsed - this.heap0);
    this.rss = Math.max(this.rss, m.rss - this.rss0);
  }
  toString(): string {
    return `peak heap +${mb(this.heap)}, peak RSS +${mb(this.rss)}`;
  }
}

const dir = mkdtempSync(join(tmpdir(), 'idem-bulk-'));
const store = await openSqliteStore({ path: join(dir, 'events.db'), durability: 'normal' });
try {
  const consumer = 'bulk_v1';
  await (await store.subscribe(consumer, { from: 'end' })).close();
  // The dead letters as parks leave them (the first event of each entity failed, the others wait
  // behind it), written in one transaction: parking them one by one through a subscription would
  // take most of the run.
  const insert = store.db.prepare(
    `INSERT INTO idem_dead_letters (consumer, event_id, stream, position, event, reason, error, attempts, status, behind, parked_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'parked', ?, ?)`,
  );
  const at = new Date().toISOString();
  store.db.transaction(() => {
    let position = 0;
    for (let i = 0; i < entities; i++) {
      const stream = `invoice-${String(i).padStart(6, '0')}`;
      let head: string | null = null;
      for (let v = 1; v <= perEntity; v++) {
        position++;
        const id = randomUUID();
        const event = {
          id,
          stream,
          version: v,
          position,
          type: 'step',
          data: { i, v },
          metadata: {},
          recordedAt: at,
        };
        const failed = v === 1;
        insert.run(
          consumer,
          id,
          stream,
          position,
          JSON.stringify(event),
          failed ? 'handler failed' : 'waiting behind an earlier dead-lettered event',
          failed ? JSON.stringify({ message: 'provider down' }) : null,
          failed ? 3 : 0,
          head,
          at,
        );
        head ??= id;
      }
    }
  })();
  const parked = (await store.consumers.get(consumer)).parked;
  console.log(`${parked} parked events of ${entities} entities (SQLite, durability normal)`);

  let peak = new Peak();
  let started = performance.now();
  const listed = await store.deadLetters.list(consumer);
  peak.sample();
  console.log(
    `listing every dead letter at once: ${listed.length} entries, ${(performance.now() - started).toFixed(0)} ms, ${peak.toString()}`,
  );
  listed.length = 0;

  peak = new Peak();
  started = performance.now();
  let pages = 0;
  const r = await store.deadLetters.retryMany(consumer, {
    onProgress: () => {
      pages++;
      peak.sample();
    },
  });
  console.log(
    `retryMany: ${r.events} events of ${r.entities} entities in ${pages} pages, ${(performance.now() - started).toFixed(0)} ms, ${peak.toString()}`,
  );

  peak = new Peak();
  started = performance.now();
  const redeliver = await store.subscribe(consumer, { batchSize: 500 });
  let redelivered = 0;
  let outOfOrder = 0;
  const lastVersion = new Map<string, number>();
  for await (const m of redeliver) {
    if (m.kind !== 'events') continue;
    for (const e of m.events) {
      if ((lastVersion.get(e.stream) ?? 0) !== e.version - 1) outOfOrder++;
      lastVersion.set(e.stream, e.version);
    }
    redelivered += m.events.length;
    await redeliver.ack(m.events[m.events.length - 1]!.position);
    peak.sample();
    if (redelivered >= r.events) break;
  }
  await redeliver.close();
  const left = (await store.consumers.get(consumer)).parked;
  console.log(
    `redelivered and acknowledged ${redelivered} events (${outOfOrder} out of entity order, ${left} still active), ${(performance.now() - started).toFixed(0)} ms, ${peak.toString()}`,
  );
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
