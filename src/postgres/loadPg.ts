import type * as Pg from 'pg';
import { IdemError } from '../core/errors.js';

/** The parts of the `pg` module the PostgreSQL store uses. */
export interface PgModule {
  Pool: typeof Pg.Pool;
  Client: typeof Pg.Client;
}

let loaded: Promise<PgModule> | undefined;

/**
 * Loads `pg`, an optional peer dependency, on first use. When it is not installed the error names
 * the package to install instead of a bare module-resolution failure.
 */
export function loadPg(): Promise<PgModule> {
  loaded ??= import('pg').then(
    (mod) => {
      // `pg` is CommonJS: its exports arrive as the default export under ESM.
      const m: PgModule = (mod as { default?: PgModule }).default ?? mod;
      return { Pool: m.Pool, Client: m.Client };
    },
    (err: unknown) => {
      loaded = undefined;
      const code = (err as { code?: string }).code;
      if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
        throw new IdemError(
          'unavailable',
          'idem/postgres needs the "pg" package, which is not installed; install it with: npm install pg',
          { package: 'pg' },
          { cause: err },
        );
      }
      throw err;
    },
  );
  return loaded;
}
