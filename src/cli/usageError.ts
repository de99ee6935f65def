/**
 * A mistake in how the command was called (a missing or contradictory option), as opposed to a value
 * the store refused. Exit code 2, printed as `idem: usage: <message>`.
 */
export class UsageError extends Error {
  readonly code = 'usage';

  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
