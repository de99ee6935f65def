// A database of its own for a measuring script under bench/, on the server of a PostgreSQL URL.
import pg from 'pg';

export interface ScratchDatabase {
  /** A connection string for the new database. */
  url: string;
  /** Drops the database (closing its connections) and ends the admin connection. */
  drop(): Promise<void>;
}

/**
 * Creates the database `<prefix>_<pid>` on the server of `serverUrl` (connecting as that URL says),
 * with the given `ALTER DATABASE ... SET` settings, e.g. `track_functions = 'all'`.
 */
export async function scratchDatabase(
  serverUrl: string,
  prefix: string,
  settings: readonly string[] = [],
): Promise<ScratchDatabase> {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  const name = `${prefix}_${process.pid}`;
  try {
    await admin.query(`CREATE DATABASE ${name}`);
    for (const setting of settings) await admin.query(`ALTER DATABASE ${name} SET ${setting}`);
  } catch (err) {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
    throw err;
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      try {
        await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await admin.end();
      }
    },
  };
}
