// The write side: commands decided on a stream's folded state, and states read as of a point in history.
export { aggregate, type AggregateOptions } from './aggregate.js';
export { COMMAND_EVENT_NAMESPACE, commandEventId } from './commandEventId.js';
export type { Evolve, Folded } from './foldStream.js';
export {
  handleCommand,
  rejectCommand,
  MAX_COMMAND_RETRIES,
  type CommandResult,
  type Decider,
  type Decision,
  type HandleCommandOptions,
  type Rejected,
} from './handleCommand.js';
