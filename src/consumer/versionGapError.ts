import { IdemError } from '../core/errors.js';

/**
 * A consumer with the entity-version guard saw a version jump it may not (or cannot) fill: it expected
 * `expected` of `stream` and saw `seen`. Its code is `wrong_expected_version`: the consumer expected one
 * version of the entity and found another.
 */
export class VersionGapError extends IdemError {
  constructor(
    readonly stream: string,
    readonly expected: number,
    readonly seen: number,
    why: string,
  ) {
    super(
      'wrong_expected_version',
      `version gap in stream "${stream}": expected version ${expected}, saw version ${seen} (${why})`,
      { stream, expected, seen },
    );
    this.name = 'VersionGapError';
  }
}
