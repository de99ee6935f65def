import pg from 'pg';
import { randomIdentifier } from './names.js';
import { POSTGRES_URL } from './services.js';

export interface TempDatabase {
  /** The new database's name, e.g. `idem_test_1a2b3c4d5e6f`. */
  name: string;
  /** A connection string for it (POSTGRES_URL with the database replaced). */
  connectionString: string;
  /** Drops the database, ending its remaining connections. Safe to call twice. Kept when IDEM_KEEP_TEST_DATA=1. */
  drop(): Promise<void>;
}

async function withAdmin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * Creates a PostgreSQL database with a random name on the server at POSTGRES_URL (`options`: what
 * follows the name in `CREATE DATABASE`, e.g. a locale). Check `requireOrSkip('postgres')` first, and
 * call `drop()` in a `finally`.
 */
export async function createTempDatabase(prefix = 'idem_test', options = ''): Promise<TempDatabase> {
  const name = randomIdentifier(prefix);
  await withAdmin((c) => c.query(`create database "${name}" ${options}`));
  const url = new URL(POSTGRES_URL);
  url.pathname = `/${name}`;
  let dropped = false;
  return {
    name,
    connectionString: url.toString(),
    drop: async () => {
      if (dropped) return;
      dropped = true;
      if (process.env.IDEM_KEEP_TEST_DATA === '1') {
        console.error(`# kept test database ${name}`);
        return;
      }
      await withAdmin(async (c) => {
        // A pool's `end()` resolves once it has removed its clients, before their connections have
        // closed; a forced drop in that window terminates them, and a client still listening for
        // errors then emits one that nothing handles. So wait (briefly) for them to go first.
        const deadline = Date.now() + 2_000;
        while (Date.now() < deadline) {
          const r = await c.query<{ n: number }>(
            'select count(*)::int as n from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
            [name],
          );
          if (r.rows[0]!.n === 0) break;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await c.query(`drop database if exists "${name}" with (force)`);
      });
    },
  };
}

/**
 * Creates a schema with a random name in the database at `connectionString` (POSTGRES_URL by
 * default), for tests that share one database. `drop()` removes it with everything in it.
 */
export async function createTempSchema(
  connectionString = POSTGRES_URL,
  prefix = 'idem_test',
): Promise<{ schema: string; connectionString: string; drop(): Promise<void> }> {
  const schema = randomIdentifier(prefix);
  const run = async (sql: string): Promise<void> => {
    const client = new pg.Client({ connectionString });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await run(`create schema "${schema}"`);
  let dropped = false;
  return {
    schema,
    connectionString,
    drop: async () => {
      if (dropped) return;
      dropped = true;
      if (process.env.IDEM_KEEP_TEST_DATA === '1') {
        console.error(`# kept test schema ${schema}`);
        return;
      }
      await run(`drop schema if exists "${schema}" cascade`);
    },
  };
}
