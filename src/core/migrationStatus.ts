/** A store's schema version against the newest one this code ships (`current === expected` when up to date). */
export interface MigrationStatus {
  current: number;
  expected: number;
}

/** The status of a schema at version `current`, given the numbered migrations this code ships. */
export function migrationStatus(
  current: number,
  migrations: readonly { version: number }[],
): MigrationStatus {
  return { current, expected: migrations.reduce((v, m) => Math.max(v, m.version), 0) };
}
