import type { JsonObject, JsonValue } from '../core/json.js';
import type { EventStore } from '../core/eventStore.js';
import type { NewEvent } from '../core/event.js';

/** One event of a test history: the stream it is appended to and what `append` takes. */
export interface TestEvent {
  stream: string;
  type: string;
  data: JsonValue;
  metadata?: JsonObject;
  /** A UUID; the testkit gives each event without one a fixed id, the same in every scenario. */
  id?: string;
}

/** A test event with its id settled. */
export type HistoryEvent = TestEvent & { id: string };

/** A fixed UUID (version 4 layout) for the `index`th event, so that every scenario appends the same ids. */
export function testEventId(index: number): string {
  return `00000000-0000-4000-8000-${(index + 1).toString(16).padStart(12, '0')}`;
}

/** Gives every event an id (its own, or a fixed one by index). */
export function settleIds(events: readonly TestEvent[]): HistoryEvent[] {
  return events.map((e, i) => ({ ...e, id: e.id ?? testEventId(i) }));
}

/** Appends the history in order; consecutive events of one stream go in one append. */
export async function appendHistory(store: EventStore, events: readonly HistoryEvent[]): Promise<void> {
  let i = 0;
  while (i < events.length) {
    const stream = events[i]!.stream;
    const run: NewEvent[] = [];
    while (i < events.length && events[i]!.stream === stream) {
      const e = events[i++]!;
      run.push({ id: e.id, type: e.type, data: e.data, ...(e.metadata ? { metadata: e.metadata } : {}) });
    }
    await store.append(stream, run);
  }
}
