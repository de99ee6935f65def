import { existsSync, renameSync, rmSync } from 'node:fs';
import Database from 'better-sqlite3';
import { IdemError } from '../core/errors.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';

/** Progress of a backup or restore, in database pages. */
export interface BackupProgress {
  totalPages: number;
  remainingPages: number;
}

export interface BackupOptions {
  /** Replace `to` when it exists. @default false */
  force?: boolean;
  /** Called after each step of the copy. */
  onProgress?: (progress: BackupProgress) => void;
}

const BACKUP_OPTION_KEYS = { force: true, onProgress: true } as const satisfies KnownKeys<BackupOptions>;

/** What a finished backup or restore holds. */
export interface BackupResult {
  path: string;
  pages: number;
  bytes: number;
  /** The copy's head position and event count. */
  head: number;
  events: number;
}

/** Pages copied per step while nothing else writes: about 20 progress reports for the whole file. */
const STEPS = 20;
const ALL_REMAINING = 0x7fffffff;

/**
 * Copies an idem SQLite store to `to` with SQLite's online backup API, while other processes keep
 * appending. The copy is a consistent snapshot: the backup API starts over when another connection
 * writes between two steps, so once that happens it copies everything that remains in one step,
 * inside one read transaction (which in WAL mode does not block writers). The copy is written to
 * `<to>.partial`, checked (`PRAGMA quick_check`, the event table), and only then renamed to `to`.
 */
export async function backupSqliteStore(
  from: string,
  to: string,
  options: BackupOptions = {},
): Promise<BackupResult> {
  checkKnownKeys(options, BACKUP_OPTION_KEYS, '');
  const source = openIdemFile(from, 'the store');
  try {
    return await copyDatabase(source, to, options);
  } finally {
    source.close();
  }
}

/**
 * Restores a backup made by `backupSqliteStore` (or any idem SQLite store file) to `to`. Refused
 * when `to` exists unless `force`; stop every process that has `to` open first. The backup is
 * checked before anything is written, copied to `<to>.partial`, and renamed over `to` (its old WAL
 * and shared-memory files are removed, so nothing of the old store survives).
 */
export async function restoreSqliteStore(
  backup: string,
  to: string,
  options: BackupOptions = {},
): Promise<BackupResult> {
  checkKnownKeys(options, BACKUP_OPTION_KEYS, '');
  const source = openIdemFile(backup, 'the backup');
  try {
    checkCopy(source, backup);
    return await copyDatabase(source, to, options, () => {
      rmSync(`${to}-wal`, { force: true });
      rmSync(`${to}-shm`, { force: true });
    });
  } finally {
    source.close();
  }
}

async function copyDatabase(
  source: Database.Database,
  to: string,
  options: BackupOptions,
  beforeRename: () => void = () => undefined,
): Promise<BackupResult> {
  if (existsSync(to) && options.force !== true)
    throw new IdemError('invalid_input', `${to} exists; choose another path, or replace it with --force`, {
      field: 'to',
      path: to,
    });
  const partial = `${to}.partial`;
  rmSync(partial, { force: true });
  try {
    let previous = Number.POSITIVE_INFINITY;
    let rate = 0;
    await source.backup(partial, {
      progress: (p) => {
        options.onProgress?.(p);
        // A step that did not shrink what remains means the copy started over: another connection
        // wrote. Copy the rest in one step, inside one read transaction.
        if (p.remainingPages >= previous) rate = ALL_REMAINING;
        else if (rate === 0) rate = Math.max(1, Math.ceil(p.totalPages / STEPS));
        previous = p.remainingPages;
        return rate;
      },
    });
    const copy = new Database(partial);
    let result: BackupResult;
    try {
      result = { path: to, ...checkCopy(copy, partial) };
    } finally {
      copy.close();
    }
    options.onProgress?.({ totalPages: result.pages, remainingPages: 0 });
    beforeRename();
    renameSync(partial, to);
    return result;
  } catch (err) {
    rmSync(partial, { force: true });
    throw err;
  }
}

function openIdemFile(path: string, what: string): Database.Database {
  if (!existsSync(path)) throw new IdemError('not_found', `no store at ${path}`, { path });
  const db = new Database(path, { readonly: true, fileMustExist: true });
  const table = db
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'idem_events'")
    .get();
  if (!table) {
    db.close();
    throw new IdemError('invalid_input', `${path} is not an idem store (${what} has no idem_events table)`, {
      path,
    });
  }
  return db;
}

/** Checks a copied file and reads what it holds; a damaged copy is `internal`. */
function checkCopy(db: Database.Database, path: string): Omit<BackupResult, 'path'> {
  const check = db.pragma('quick_check', { simple: true }) as string;
  if (check !== 'ok')
    throw new IdemError('internal', `the copy at ${path} failed SQLite's quick_check: ${check}`, { path });
  const pages = db.pragma('page_count', { simple: true }) as number;
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  const row = db
    .prepare('SELECT count(*) AS events, coalesce(max(position), 0) AS head FROM idem_events')
    .get() as {
    events: number;
    head: number;
  };
  return { pages, bytes: pages * pageSize, head: row.head, events: row.events };
}
