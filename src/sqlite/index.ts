// `idem/sqlite`: the embedded event store (and, with the consumer runtime, the SQLite target).
export { openSqliteStore, SqliteEventStore } from './sqliteStore.js';
export type { Durability, SqliteStoreOptions } from './sqliteStore.js';
export { sqliteTarget, SqliteTarget, type SqliteTargetOptions } from './target.js';
export { backupSqliteStore, restoreSqliteStore } from './backup.js';
export type { BackupOptions, BackupProgress, BackupResult } from './backup.js';
