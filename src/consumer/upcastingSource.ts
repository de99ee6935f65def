import type { RecordedEvent } from '../core/event.js';
import type { ConsumerSource } from '../core/consumerSource.js';
import type { ReadAllOptions, ReadStreamOptions } from '../core/eventStore.js';
import type { SubscribeOptions, Subscription, SubscriptionMessage } from '../core/subscription.js';
import type { UpcastEvents } from '../core/upcasters.js';

/**
 * A consumer's source with the consumer's upcasters applied where events enter the runtime: the
 * subscription's batches (redeliveries included) and the reads of gap recovery and `whenCaughtUp`.
 * Everything else goes to the source unchanged.
 */
export function upcastingSource(source: ConsumerSource, upcast: UpcastEvents): ConsumerSource {
  const readStream = source.readStream?.bind(source);
  const readAll = source.readAll?.bind(source);
  const metrics = source.metrics?.bind(source);
  const shreds = source.shreds?.bind(source);
  return {
    headPosition: () => source.headPosition(),
    subscribe: async (consumer: string, options?: SubscribeOptions) =>
      upcastSubscription(await source.subscribe(consumer, options), upcast),
    ...(readStream && {
      readStream: (stream: string, options?: ReadStreamOptions) =>
        upcastEach(readStream(stream, options), upcast),
    }),
    ...(readAll && { readAll: (options?: ReadAllOptions) => upcastEach(readAll(options), upcast) }),
    ...(metrics && { metrics }),
    ...(shreds && { shreds }),
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
