import type { RecordedEvent } from '../../../src/core/event.js';
import type { EventStore } from '../../../src/core/eventStore.js';
import type { Subscription, SubscriptionMessage } from '../../../src/core/subscription.js';
import { randomStream } from '../../support/names.js';
import { until } from '../../support/until.js';

export interface StoreFixture {
  store: EventStore;
  cleanup: () => Promise<void>;
}

/**
 * Returns a fresh, empty store. Some tests open a second handle on the same store (`reopen`), as a
 * second process would; stores that cannot (memory) return the same object there.
 */
export type MakeStore = () => Promise<StoreFixture & { reopen?: () => Promise<StoreFixture> }>;

/** Runs `fn` with a fresh store and always cleans up. */
export async function withStore<T>(
  makeStore: MakeStore,
  fn: (store: EventStore, reopen: () => Promise<StoreFixture>) => Promise<T>,
): Promise<T> {
  const f = await makeStore();
  try {
    return await fn(
      f.store,
      f.reopen ?? (() => Promise.resolve({ store: f.store, cleanup: () => Promise.resolve() })),
    );
  } finally {
    await f.cleanup();
  }
}

/** Appends `n` events to `stream` (one append each), returns them as recorded. */
export async function appendN(
  store: EventStore,
  stream: string,
  n: number,
  type = 'thing.happened',
): Promise<number[]> {
  const positions: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = await store.append(stream, [{ type, data: { i }, metadata: { note: `n${i}` } }]);
    positions.push(r.lastPosition);
  }
  return positions;
}

/** Appends one event to each of `streams` in turn, `rounds` times. */
export async function appendRounds(store: EventStore, streams: string[], rounds: number): Promise<void> {
  for (let r = 0; r < rounds; r++) {
    for (const s of streams) await store.append(s, [{ type: 'thing.happened', data: { r } }]);
  }
}

export function streams(n: number, category = 'sub'): string[] {
  return Array.from({ length: n }, () => randomStream(category));
}

/**
 * Pulls messages from a subscription in the background, optionally acknowledging each batch, and
 * keeps them for assertions. `stop()` closes the subscription and waits for the loop to end.
 */
export class Reader {
  readonly messages: SubscriptionMessage[] = [];
  error: unknown = null;
  readonly done: Promise<void>;

  constructor(
    readonly sub: Subscription,
    private readonly autoAck = true,
  ) {
    this.done = this.loop();
  }

  private async loop(): Promise<void> {
    try {
      for await (const m of this.sub) {
        this.messages.push(m);
        if (this.autoAck && m.kind === 'events' && m.events.length > 0) {
          await this.sub.ack(Math.max(...m.events.map((e) => e.position)));
        }
      }
    } catch (err) {
      this.error = err;
    }
  }

  get events(): RecordedEvent[] {
    return this.messages.flatMap((m) => (m.kind === 'events' ? m.events : []));
  }

  get positions(): number[] {
    return this.events.map((e) => e.position);
  }

  /** Waits until at least `n` events arrived. */
  async waitForEvents(n: number, timeoutMs = 10_000): Promise<RecordedEvent[]> {
    await until(() => this.error !== null || this.events.length >= n, {
      timeoutMs,
      message: `${n} events (have ${this.events.length})`,
    });
    if (this.error) throw this.error as Error;
    return this.events;
  }

  async waitFor(cond: () => boolean, message: string, timeoutMs = 10_000): Promise<void> {
    await until(() => this.error !== null || cond(), { timeoutMs, message });
    if (this.error) throw this.error as Error;
  }

  async stop(): Promise<void> {
    await this.sub.close();
    await this.done;
  }
}

/** The next message, failing after `timeoutMs` instead of hanging the test. */
export async function nextMessage(
  it: AsyncIterator<SubscriptionMessage>,
  timeoutMs = 10_000,
): Promise<SubscriptionMessage> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const r = await Promise.race([
      it.next(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no subscription message within ${timeoutMs} ms`)),
          timeoutMs,
        );
      }),
    ]);
    if (r.done) throw new Error('subscription ended');
    return r.value;
  } finally {
    clearTimeout(timer);
  }
}

/** The next `events` message (skipping a `caught_up`). */
export async function nextEvents(
  it: AsyncIterator<SubscriptionMessage>,
): Promise<Extract<SubscriptionMessage, { kind: 'events' }>> {
  for (;;) {
    const m = await nextMessage(it);
    if (m.kind === 'events') return m;
  }
}

export async function readAllEvents(store: EventStore): Promise<RecordedEvent[]> {
  const out: RecordedEvent[] = [];
  for await (const e of store.readAll()) out.push(e);
  return out;
}

/** Expects `fn` to reject with an IdemError of `code`; returns it. */
export async function rejectsWith(
  fn: () => Promise<unknown>,
  code: string,
): Promise<Error & { code: string; details: Record<string, unknown> }> {
  try {
    await fn();
  } catch (err) {
    const e = err as Error & { code: string; details: Record<string, unknown> };
    if (e.code !== code)
      throw new Error(`expected error code ${code}, got ${String(e.code)}: ${e.message}`, { cause: err });
    return e;
  }
  throw new Error(`expected error code ${code}, but it succeeded`);
}
