import type { RecordedEvent } from '../core/event.js';
import type { EventStore, ReadAllOptions, ReadStreamOptions } from '../core/eventStore.js';
import type { SubscribeOptions, Subscription, SubscriptionMessage } from '../core/subscription.js';
import type { UpcastEvents } from '../core/upcasters.js';

/**
 * A consumer's source with the consumer's upcasters applied where events enter the runtime: the
 * subscription's batches (redeliveries included) and the reads of gap recovery and `whenCaughtUp`.
 * Everything else goes to the source unchanged.
 */
export function upcastingSource(source: EventStore, upcast: UpcastEvents): EventStore {
  return {
    append: (stream, events, options) => source.append(stream, events, options),
    readStream: (stream: string, options?: ReadStreamOptions) =>
      upcastEach(source.readStream(stream, options), upcast),
    readAll: (options?: ReadAllOptions) => upcastEach(source.readAll(options), upcast),
    headPosition: () => source.headPosition(),
    streamVersion: (stream) => source.streamVersion(stream),
    subscribe: async (consumer: string, options?: SubscribeOptions) =>
      upcastSubscription(await source.subscribe(consumer, options), upcast),
    consumers: source.consumers,
    deadLetters: source.deadLetters,
    close: () => source.close(),
  };
}

async function* upcastEach(
  events: AsyncIterable<RecordedEvent>,
  upcast: UpcastEvents,
): AsyncGenerator<RecordedEvent> {
  for await (const e of events) yield upcast([e])[0]!;
}

function upcastSubscription(sub: Subscription, upcast: UpcastEvents): Subscription {
  return {
    get consumer() {
      return sub.consumer;
    },
    get epoch() {
      return sub.epoch;
    },
    get startPosition() {
      return sub.startPosition;
    },
    ack: (position) => sub.ack(position),
    park: (position, info) => sub.park(position, info),
    fail: (info) => sub.fail(info),
    outage: (active) => sub.outage(active),
    close: () => sub.close(),
    [Symbol.asyncIterator]: () => {
      const inner = sub[Symbol.asyncIterator]();
      return {
        next: async (): Promise<IteratorResult<SubscriptionMessage>> => {
          const r = await inner.next();
          if (!r.done && r.value.kind === 'events') upcast(r.value.events);
          return r;
        },
        return: async (value?: unknown): Promise<IteratorResult<SubscriptionMessage>> =>
          inner.return ? inner.return(value) : { done: true, value: undefined },
      };
    },
  };
}
