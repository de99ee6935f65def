import type { RecordedEvent } from '../core/event.js';
import type { EventStore } from '../core/eventStore.js';
import type { HistoryBoundOptions } from '../core/history.js';

/** Folds one event into a state. It returns the next state and leaves the one it is given unchanged. */
export type Evolve<State> = (state: State, event: RecordedEvent) => State;

/** A state folded from a stream, and the version of the last event folded into it (0 for none). */
export interface Folded<State> {
  state: State;
  version: number;
}

/**
 * Folds the stream's events after `from.version` into `from.state`, up to `bound` when given.
 * `visit` sees each event with the state right after it.
 */
export async function foldStream<State>(
  store: EventStore,
  stream: string,
  evolve: Evolve<State>,
  from: Folded<State>,
  bound: HistoryBoundOptions = {},
  visit?: (event: RecordedEvent, state: State) => void,
): Promise<Folded<State>> {
  let { state, version } = from;
  for await (const e of store.readStream(stream, { ...bound, fromVersion: version + 1 })) {
    state = evolve(state, e);
    version = e.version;
    visit?.(e, state);
  }
  return { state, version };
}
