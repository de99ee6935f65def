/** `/health`: is the store reachable, and is its schema at the version this code expects? */
import type { EventStore } from '../core/eventStore.js';
import { schemaVersion, STORE_MIGRATIONS } from '../sqlite/migrations.js';
import { SqliteEventStore } from '../sqlite/sqliteStore.js';

export interface MigrationStatus {
  current: number;
  expected: number;
}

/** A store may offer this (duck-typed) so that `/health` can report whether its migrations are current. */
export interface MigrationAware {
  migrationStatus(): MigrationStatus | Promise<MigrationStatus>;
}

export interface HealthReport {
  status: 'ok' | 'error';
  store: { ok: boolean; head?: number; error?: string };
  migrations: { ok: boolean; checked: boolean; current?: number; expected?: number; error?: string };
}

function isMigrationAware(store: unknown): store is MigrationAware {
  return typeof (store as Partial<MigrationAware>).migrationStatus === 'function';
}

export async function checkHealth(
  store: EventStore,
  migrations?: () => MigrationStatus | Promise<MigrationStatus>,
): Promise<HealthReport> {
  const report: HealthReport = {
    status: 'ok',
    store: { ok: true },
    migrations: { ok: true, checked: false },
  };
  try {
    report.store.head = await store.headPosition();
  } catch (err) {
    report.store = { ok: false, error: (err as Error).message };
  }
  const probe = migrations ?? (isMigrationAware(store) ? () => store.migrationStatus() : sqliteProbe(store));
  if (probe) {
    try {
      const { current, expected } = await probe();
      report.migrations = { ok: current === expected, checked: true, current, expected };
    } catch (err) {
      report.migrations = { ok: false, checked: true, error: (err as Error).message };
    }
  }
  if (!report.store.ok || !report.migrations.ok) report.status = 'error';
  return report;
}

/** The embedded store's schema version against the migrations this code ships. */
function sqliteProbe(store: EventStore): (() => MigrationStatus) | undefined {
  if (!(store instanceof SqliteEventStore)) return undefined;
  return () => ({
    current: schemaVersion(store.db),
    expected: Math.max(0, ...STORE_MIGRATIONS.map((m) => m.version)),
  });
}
