/** `/health`: is the store reachable, and is its schema at the version this code expects? */
import type { EventStore } from '../core/eventStore.js';
import type { MigrationStatus } from '../core/migrationStatus.js';

export type { MigrationStatus };

export interface HealthReport {
  status: 'ok' | 'error';
  store: { ok: boolean; head?: number; error?: string };
  migrations: { ok: boolean; checked: boolean; current?: number; expected?: number; error?: string };
}

/**
 * Asks the store for its head and its migration status (`EventStore.migrationStatus`), or `migrations`
 * when given. A store that answers neither is reported with `checked: false`.
 */
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
  const probe = migrations ?? store.migrationStatus?.bind(store);
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
