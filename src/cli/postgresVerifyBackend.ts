import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { openPostgresStore } from '../postgres/postgresStore.js';
import { postgresTarget, type PostgresTarget } from '../postgres/target.js';
import type { VerifyBackend } from '../testkit/index.js';

/**
 * `idem verify --consumer --postgres URL`: every scenario gets two new schemas in the database (the
 * store's and the target's), dropped when it ends. One pool serves them all.
 */
export function postgresVerifyBackend(url: string): VerifyBackend<PostgresTarget> & { end(): Promise<void> } {
  const pool = new pg.Pool({ connectionString: url, max: 8 });
  return {
    name: `postgres (temporary schemas in ${new URL(url).pathname.slice(1) || 'postgres'})`,
    async open() {
      const base = `idem_verify_${randomBytes(6).toString('hex')}`;
      const store = await openPostgresStore({ pool, schema: base });
      const target = postgresTarget(pool, { schema: `${base}_target` });
      return {
        store,
        target,
        async close() {
          await target.close();
          await store.close();
          await pool.query(
            `DROP SCHEMA IF EXISTS "${base}" CASCADE; DROP SCHEMA IF EXISTS "${base}_target" CASCADE`,
          );
        },
      };
    },
    end: () => pool.end(),
  };
}
