import type { Io } from './output.js';
import type { ExitCode } from './exitCodes.js';

/** Shared by the verbs of one `main` call. */
export interface CliContext {
  io: Io;
  /** A verb that finishes without throwing but must report failure (e.g. `verify` found a violation) sets this. */
  exitCode: ExitCode;
  /**
   * For long-running verbs (`tail`, `serve`): a signal aborted on the first SIGINT/SIGTERM. The process
   * handlers are installed on the first call only, so short verbs keep Node's default Ctrl-C behaviour.
   */
  stopSignal(): AbortSignal;
  env: NodeJS.ProcessEnv;
}
