// A billing consumer process for the crash test: `node --import tsx crashChild.ts <store.db> <target.db> <ledger|retain|blind> [blind.db]`
// (`retain`: the ledger with `ledger: { retain: 'checkpoint' }`).
// Exits 75 if it loses the lease. Prints `ready` once it owns the consumer, `m <delivered> <duplicates> <processed>` every few ms, and
// `done` when it has caught up with the store. The parent SIGKILLs it at random moments.
import Database from 'better-sqlite3';
import { createConsumer } from '../../../src/consumer/consumer.js';
import { openSqliteStore } from '../../../src/sqlite/sqliteStore.js';
import { sqliteTarget } from '../../../src/sqlite/target.js';

const [storePath, targetPath, mode, blindPath] = process.argv.slice(2);
if (
  !storePath ||
  !targetPath ||
  (mode !== 'ledger' && mode !== 'retain' && mode !== 'blind') ||
  (mode === 'blind' && !blindPath)
) {
  console.error('usage: crashChild.ts <store.db> <target.db> <ledger|retain|blind> [blind.db]');
  process.exit(2);
}

const store = await openSqliteStore({ path: storePath, durability: 'normal' });
const target = sqliteTarget(targetPath, { durability: 'normal' });
target.db.exec(
  `CREATE TABLE IF NOT EXISTS invoice_status (stream TEXT PRIMARY KEY, total INTEGER NOT NULL, events INTEGER NOT NULL)`,
);
const upsert = target.db.prepare(
  `INSERT INTO invoice_status (stream, total, events) VALUES (?, ?, 1)
   ON CONFLICT (stream) DO UPDATE SET total = total + excluded.total, events = events + 1`,
);
// The blind counter: its own connection and file, autocommitted per event, outside the ledger's transaction.
const blind = mode === 'blind' ? new Database(blindPath) : null;
blind?.pragma('journal_mode = WAL');
blind?.exec(
  `CREATE TABLE IF NOT EXISTS invoice_status (stream TEXT PRIMARY KEY, total INTEGER NOT NULL, events INTEGER NOT NULL)`,
);
const blindUpsert = blind?.prepare(
  `INSERT INTO invoice_status (stream, total, events) VALUES (?, ?, 1)
   ON CONFLICT (stream) DO UPDATE SET total = total + excluded.total, events = events + 1`,
);

let handled = 0;
const consumer = createConsumer({
  name: 'billing_v2',
  source: store,
  target,
  filter: { categories: ['invoice'] },
  // Merged catch-up batches of up to 300: kills land inside merged batches too, and there are enough batches to kill in.
  batch: { size: 100, catchUpSize: 300 },
  standby: true,
  leaseTtlMs: 1000,
  ...(mode === 'retain' ? { ledger: { retain: 'checkpoint' as const } } : {}),
  handle: (event) => {
    // Progress for the parent, written synchronously to the pipe (timers may starve during catch-up).
    if (++handled % 50 === 0) report();
    const amount = (event.data as { amount: number }).amount;
    if (blindUpsert) blindUpsert.run(event.stream, amount);
    else upsert.run(event.stream, amount); // on ctx.tx, which is target.db inside the batch transaction
  },
});

function report(): void {
  const m = consumer.metrics();
  process.stdout.write(`m ${m.delivered} ${m.duplicates} ${m.processed}\n`);
}
await consumer.start();
process.stdout.write('ready\n');
const timer = setInterval(report, 5);
try {
  await consumer.whenCaughtUp();
} catch (err) {
  // On a loaded machine the short lease can lapse and be taken over (fenced): exit and be restarted.
  process.stdout.write(`lost ${(err as Error).message}\n`);
  process.exit(75);
}
clearInterval(timer);
report();
await consumer.stop();
await store.close();
await target.close();
blind?.close();
process.stdout.write('done\n');
