import Database from 'better-sqlite3';
import { openSqliteStore } from '../sqlite/index.js';
import { STREAMS } from './workload.js';
import { streamHash } from '../core/streamHash.js';

/**
 * Fixture for the catch-up scenario: `total` events in a new embedded store file, generated inside
 * SQLite (a recursive CTE) because appending a million events through the API would take minutes of
 * setup. The rows are what `append` writes for the benchmark workload (about 200 bytes of JSON,
 * 1,000 streams with contiguous versions, UUID ids); the store is opened afterwards to check its
 * head, so a change of the store's table fails here loudly instead of measuring a broken log.
 */
export async function writeBulkLog(path: string, total: number): Promise<void> {
  // Opening the store creates its schema (migrations) in the new file.
  await (await openSqliteStore({ path, durability: 'normal' })).close();
  const db = new Database(path);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.function('idem_stream_hash', { deterministic: true }, (stream: unknown) => streamHash(String(stream)));
    const chunk = 100_000;
    const insert = db.prepare(`
      WITH RECURSIVE seq(i) AS (SELECT CAST(? AS INTEGER) UNION ALL SELECT i + 1 FROM seq WHERE i + 1 < ?)
      INSERT INTO idem_events (position, id, stream, version, type, data, metadata, recorded_at, stream_hash)
      SELECT i + 1,
        lower(printf('%s-%s-4%s-8%s-%s', hex(randomblob(4)), hex(randomblob(2)), substr(hex(randomblob(2)), 2),
          substr(hex(randomblob(2)), 2), hex(randomblob(6)))),
        'invoice-' || (i % ${STREAMS}), i / ${STREAMS} + 1,
        CASE WHEN i % 4 = 3 THEN 'invoice.paid' ELSE 'invoice.issued' END,
        json_object('invoiceId', 'inv-' || i, 'customer', 'customer-' || ((i * 7919) % 50000), 'amount', 100 + (i % 9900),
          'currency', 'EUR', 'lines', 1 + (i % 12), 'note', 'net 30 days; thank you for your business',
          'issuedAt', '2026-01-01T00:00:00.000Z'),
        json_object('commandId', 'cmd-' || i),
        '2026-01-01T00:00:00.000Z',
        idem_stream_hash('invoice-' || (i % ${STREAMS}))
      FROM seq`);
    for (let from = 0; from < total; from += chunk) insert.run(from, Math.min(total, from + chunk));
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
  const store = await openSqliteStore({ path, durability: 'normal' });
  try {
    const head = await store.headPosition();
    if (head !== total) throw new Error(`bulk log: head is ${head}, expected ${total}`);
    const versions: number[] = [];
    for await (const e of store.readStream('invoice-7', { limit: 3 })) versions.push(e.version);
    const expected = Array.from({ length: Math.min(3, Math.ceil((total - 7) / STREAMS)) }, (_, i) => i + 1);
    if (versions.join() !== expected.join())
      throw new Error(`bulk log: invoice-7 reads back versions ${versions.join()}`);
  } finally {
    await store.close();
  }
}
