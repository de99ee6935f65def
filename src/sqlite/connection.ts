import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';

/** The pause between two tries when SQLite answered SQLITE_BUSY without waiting. */
const RETRY_PAUSE_MS = 10;
const pause = new Int32Array(new SharedArrayBuffer(4));

function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/**
 * Runs `fn` again while SQLite answers SQLITE_BUSY, for up to `timeoutMs` in all.
 *
 * The busy timeout covers most lock waits, but SQLite answers some at once without calling the busy
 * handler: switching a new file to WAL while another process does the same, opening the WAL while
 * another connection runs recovery, or upgrading a read lock that would otherwise deadlock. Processes
 * that open one new file together meet exactly these, so the opening steps go through here.
 * Synchronous (as better-sqlite3 is): the pause blocks the thread, which only happens while opening.
 */
export function retryWhileBusy<T>(fn: () => T, timeoutMs: number): T {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return fn();
    } catch (err) {
      if (!isBusy(err) || Date.now() >= deadline) throw err;
      Atomics.wait(pause, 0, 0, RETRY_PAUSE_MS);
    }
  }
}

export interface OpenOptions {
  durability: 'full' | 'normal';
  busyTimeoutMs: number;
  /**
   * Given, the file must exist already (nothing is created), and this runs on the new connection
   * before any setting is written, so a file it refuses (by throwing) is left exactly as it was.
   */
  existing?: (db: Database.Database) => void;
}

/**
 * Opens (and creates, with its directory, unless `existing` is given) a database file in WAL mode
 * with the given durability. Closes the connection again if a setting cannot be applied.
 */
export function openDatabase(path: string, options: OpenOptions): Database.Database {
  const { existing } = options;
  if (path !== ':memory:' && existing === undefined) mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path, { timeout: options.busyTimeoutMs, fileMustExist: existing !== undefined });
  try {
    if (existing) retryWhileBusy(() => existing(db), options.busyTimeoutMs);
    retryWhileBusy(() => {
      db.pragma('journal_mode = WAL');
      db.pragma(`synchronous = ${options.durability === 'full' ? 'FULL' : 'NORMAL'}`);
      db.pragma('foreign_keys = ON');
    }, options.busyTimeoutMs);
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}
