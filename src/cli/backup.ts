import type { Command } from 'commander';
import { InvalidInputError } from '../core/errors.js';
import { backupSqliteStore, restoreSqliteStore, type BackupProgress } from '../sqlite/backup.js';
import type { CliContext } from './context.js';
import { DEFAULT_DB } from './openStore.js';
import { Output, plural } from './output.js';

interface BackupFlags {
  db?: string;
  force?: boolean;
  json?: boolean;
}

const BACKUP_HELP = `
Copies the embedded store to OUT while it is in use (a running idem serve keeps appending): SQLite's
online backup API makes a consistent snapshot, which is checked (quick_check) before it is renamed
to OUT. Progress goes to stderr. For PostgreSQL, see docs/postgres.md (Backups).

Examples:
  $ idem backup --db ./data/idem.db ./backups/idem-1.db
  $ idem verify --db ./backups/idem-1.db`;

const RESTORE_HELP = `
Restores a backup made by idem backup to the store path (--db, default ${DEFAULT_DB}). Refused when
that file exists unless --force; stop every process that has the store open first.

Examples:
  $ idem restore ./backups/idem-1.db --db ./data/idem.db --force`;

export function registerBackup(program: Command, ctx: CliContext): void {
  program
    .command('backup')
    .description('copy the embedded store to a file, consistently, while it is in use')
    .argument('<out>', 'the backup file to write')
    .option('--db <path>', `the embedded store (default ${DEFAULT_DB})`)
    .option('--force', 'replace OUT when it exists')
    .option('--json', 'print the result as JSON')
    .addHelpText('after', BACKUP_HELP)
    .action(async (out: string, flags: BackupFlags) => {
      const o = new Output(ctx.io, flags.json === true);
      const from = flags.db ?? DEFAULT_DB;
      const result = await backupSqliteStore(from, nonEmpty(out, 'out'), {
        force: flags.force === true,
        onProgress: progress(ctx, 'backup'),
      });
      o.data(result);
      o.line(
        `backed up ${from} to ${result.path}: ${plural(result.events, 'event')}, head ${result.head}, ${mb(result.bytes)}`,
      );
    });

  program
    .command('restore')
    .description('restore the embedded store from a backup file')
    .argument('<backup>', 'a file written by idem backup')
    .option('--db <path>', `the store to restore to (default ${DEFAULT_DB})`)
    .option('--force', 'replace the store when it exists')
    .option('--json', 'print the result as JSON')
    .addHelpText('after', RESTORE_HELP)
    .action(async (backup: string, flags: BackupFlags) => {
      const o = new Output(ctx.io, flags.json === true);
      const to = flags.db ?? DEFAULT_DB;
      const result = await restoreSqliteStore(nonEmpty(backup, 'backup'), to, {
        force: flags.force === true,
        onProgress: progress(ctx, 'restore'),
      });
      o.data(result);
      o.line(`restored ${backup} to ${to}: ${plural(result.events, 'event')}, head ${result.head}`);
    });
}

function nonEmpty(value: string, field: string): string {
  if (value.trim() === '') throw new InvalidInputError(field, 'must be a file path');
  return value;
}

/** Prints "copied N of M pages" on stderr (with --json too) at most once per tenth of the file. */
function progress(ctx: CliContext, what: string): (p: BackupProgress) => void {
  let lastTenth = -1;
  return (p) => {
    const done = p.totalPages - p.remainingPages;
    const tenth = p.totalPages === 0 ? 10 : Math.floor((done * 10) / p.totalPages);
    if (tenth === lastTenth) return;
    lastTenth = tenth;
    ctx.io.stderr.write(`${what}: copied ${done} of ${p.totalPages} pages\n`);
  };
}

function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}
