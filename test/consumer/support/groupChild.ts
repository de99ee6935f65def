// A consumer group member process for the group process test:
// `node --import tsx groupChild.ts <store.db> <target.db> <partitions>`. Prints `ready` once it has
// joined; records every event it handles (stream, version, member) in the target, in the batch's
// transaction; runs until killed or sent SIGTERM (then stops cleanly and exits 0).
import { createConsumer } from '../../../src/consumer/consumer.js';
import { openSqliteStore } from '../../../src/sqlite/sqliteStore.js';
import { sqliteTarget } from '../../../src/sqlite/target.js';

const [storePath, targetPath, partitions] = process.argv.slice(2);
if (!storePath || !targetPath || !partitions) {
  console.error('usage: groupChild.ts <store.db> <target.db> <partitions>');
  process.exit(2);
}

const store = await openSqliteStore({ path: storePath, durability: 'normal' });
const target = sqliteTarget(targetPath, { durability: 'normal' });
target.db.exec(
  `CREATE TABLE IF NOT EXISTS handled (seq INTEGER PRIMARY KEY, stream TEXT NOT NULL, version INTEGER NOT NULL, member TEXT NOT NULL)`,
);
const insert = target.db.prepare('INSERT INTO handled (stream, version, member) VALUES (?, ?, ?)');
let member = '';
const consumer = createConsumer({
  name: 'ledger_v1',
  source: store,
  target,
  partitions: Number(partitions),
  batch: { size: 50, catchUpSize: 100 },
  leaseTtlMs: 1000,
  handle: (event) => {
    insert.run(event.stream, event.version, member);
  },
});
await consumer.start();
member = consumer.status().member ?? '';
console.log('ready');
process.on('SIGTERM', () => {
  void consumer
    .stop()
    .then(() => store.close())
    .then(() => target.close())
    .then(() => process.exit(0));
});
