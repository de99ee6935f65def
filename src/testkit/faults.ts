import type { BatchRecord, ConsumerTarget, TargetTransaction } from '../core/consumerTarget.js';
import type { RecordedEvent } from '../core/event.js';
import type { EventStore } from '../core/eventStore.js';
import type { SubscribeOptions, Subscription, SubscriptionMessage } from '../core/subscription.js';

/** A failure the testkit injects; an ordinary error, so the runtime reconnects as after a real one. */
export class InjectedFault extends Error {
  constructor(what: string) {
    super(`injected by the testkit: ${what}`);
    this.name = 'InjectedFault';
  }
}

/** Rewrites what a subscription delivers (the events of a message, their order, extra messages). */
export type MessageTransform = (
  messages: AsyncIterator<SubscriptionMessage>,
) => AsyncGenerator<SubscriptionMessage, void, undefined>;

/** The hooks a scenario sets on the source and target wrappers; each is optional. */
export interface FaultHooks {
  /** Sees every delivered event message (after `transform`). */
  delivered?: (events: readonly RecordedEvent[]) => void;
  transform?: MessageTransform;
  /** Called before the store acknowledges: throw to crash after the commit and before the ack. */
  beforeAck?: (position: number) => void;
  /** Called once the store acknowledged. */
  acked?: (position: number) => void;
  /** Sees each batch record the runtime writes (ledger rows, entity versions, checkpoint). */
  recorded?: (record: BatchRecord) => void;
  /** Called after a batch's work, before its commit: throw to crash inside the batch (it rolls back). */
  beforeCommit?: (record: BatchRecord) => void;
}

/** Binds methods to the real object, so a Proxy passes `this`-using classes through unchanged. */
function forward<T extends object>(real: T, prop: string | symbol): unknown {
  const v: unknown = Reflect.get(real, prop, real);
  return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(real) : v;
}

/** The store as the consumer sees it: `subscribe` goes through the hooks, everything else is the store. */
export function faultySource(store: EventStore, hooks: FaultHooks): EventStore {
  const subscribe = async (consumer: string, options?: SubscribeOptions): Promise<Subscription> =>
    faultySubscription(await store.subscribe(consumer, options), hooks);
  return new Proxy(store, {
    get: (real, prop) => (prop === 'subscribe' ? subscribe : forward(real, prop)),
  });
}

function faultySubscription(sub: Subscription, hooks: FaultHooks): Subscription {
  async function* messages(): AsyncGenerator<SubscriptionMessage, void, undefined> {
    const it = sub[Symbol.asyncIterator]();
    const source = hooks.transform ? hooks.transform(it) : passThrough(it);
    for await (const m of source) {
      if (m.kind === 'events') hooks.delivered?.(m.events);
      yield m;
    }
  }
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
    async ack(position) {
      hooks.beforeAck?.(position);
      await sub.ack(position);
      hooks.acked?.(position);
    },
    park: (position, info) => sub.park(position, info),
    fail: (info) => sub.fail(info),
    outage: (active) => sub.outage(active),
    close: () => sub.close(),
    [Symbol.asyncIterator]: messages,
  };
}

async function* passThrough(
  it: AsyncIterator<SubscriptionMessage>,
): AsyncGenerator<SubscriptionMessage, void, undefined> {
  for (;;) {
    const r = await it.next();
    if (r.done) return;
    yield r.value;
  }
}

/** The target as the consumer sees it: batch records and commits go through the hooks. */
export function faultyTarget<T extends ConsumerTarget<unknown>>(target: T, hooks: FaultHooks): T {
  const transaction = <R>(fn: (t: TargetTransaction<unknown>) => Promise<R>): Promise<R> =>
    target.transaction(async (t) => {
      let record: BatchRecord | null = null;
      const watched = new Proxy(t, {
        get: (real, prop) =>
          prop === 'record'
            ? async (consumer: string, r: BatchRecord) => {
                await real.record(consumer, r);
                record = r;
                hooks.recorded?.(r);
              }
            : forward(real, prop),
      });
      const result = await fn(watched);
      if (record) hooks.beforeCommit?.(record);
      return result;
    });
  return new Proxy(target, {
    get: (real, prop) => (prop === 'transaction' ? transaction : forward(real, prop)),
  });
}
