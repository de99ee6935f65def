// The `idem/postgres` entry point: the PostgreSQL event store.
export { openPostgresStore, PostgresEventStore, type PostgresStoreOptions } from './postgresStore.js';
export type { RetryOptions } from './connectionFaults.js';
export { DEFAULT_SCHEMA } from './schemaName.js';
export { postgresTarget, PostgresTarget, type PostgresTargetOptions } from './target.js';
