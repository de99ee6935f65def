import type { EventStore } from '../core/eventStore.js';
import { InvalidInputError } from '../core/errors.js';
import type { HistoryBoundOptions } from '../core/history.js';
import { foldStream, type Evolve, type Folded } from './foldStream.js';

/** `aggregate`'s options: the stream as it was at a global position or a time (one of them). */
export type AggregateOptions = HistoryBoundOptions;

/**
 * The state of one stream: its events folded with `evolve`, starting from `initialState`. With
 * `toPosition` or `toTime` it is the state as of then (the stream's events up to the last one at or
 * below the position, or recorded at or before the time). Returns the state and the version of the
 * last event folded (0 when there is none).
 */
export async function aggregate<State>(
  store: EventStore,
  stream: string,
  evolve: Evolve<State>,
  initialState: State,
  options: AggregateOptions = {},
): Promise<Folded<State>> {
  if (typeof evolve !== 'function') throw new InvalidInputError('evolve', 'must be a function');
  return foldStream(store, stream, evolve, { state: initialState, version: 0 }, options);
}
