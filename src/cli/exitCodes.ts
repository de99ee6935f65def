import type { ErrorCode } from '../core/errors.js';

/** The `idem` command's exit codes. */
export const EXIT = {
  ok: 0,
  failure: 1,
  usage: 2,
  conflict: 3,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

const CONFLICTS: ReadonlySet<string> = new Set<ErrorCode>([
  'wrong_expected_version',
  'idempotency_conflict',
  'consumer_busy',
  'consumer_identity_conflict',
]);

const USAGE: ReadonlySet<string> = new Set(['usage', 'invalid_input', 'too_large']);

/** Maps an error code (an `IdemError` code, or the CLI's own `usage`) to the exit code. */
export function exitCodeFor(code: string): ExitCode {
  if (CONFLICTS.has(code)) return EXIT.conflict;
  if (USAGE.has(code)) return EXIT.usage;
  return EXIT.failure;
}
