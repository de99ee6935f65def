import { createConsumer, type Consumer } from '../../../src/consumer/consumer.js';
import type { ConsumerOptions, Handler, HandlerOption } from '../../../src/consumer/options.js';
import type { JsonObject } from '../../../src/core/json.js';
import { createMemoryStore, type MemoryEventStore } from '../../../src/memory/memoryStore.js';
import { randomConsumer, randomSuffix } from '../../support/names.js';
import type { MakeTargetFixture, TargetFixture, TargetFixtureOptions } from './targetFixture.js';

export interface Harness<Tx> {
  store: MemoryEventStore;
  fx: TargetFixture<Tx>;
  /** This test's output table. */
  table: string;
  name: string;
  /** A consumer with test defaults (this test's name, `addAmount` unless `handleBatch` is given, fast retries and reconnects), stopped at cleanup. */
  consumer(options?: Partial<ConsumerOptions<Tx>>): Consumer;
  /** The usual handler: adds `data.amount` to the stream's total in the output table. */
  addAmount: Handler<Tx>;
  /** Appends `perStream` events `{ amount }` to each of `streams`, interleaved; returns the exactly-once totals. */
  appendAmounts(
    streams: string[],
    perStream: number,
    metadata?: (stream: string, i: number) => JsonObject,
  ): Promise<Map<string, number>>;
  /** Stream -> total in the output table. */
  totals(): Promise<Map<string, number>>;
}

/** Runs `fn` with a fresh memory store, target fixture and output table; cleans up whatever happens. */
export async function withHarness<Tx>(
  make: MakeTargetFixture<Tx>,
  fn: (h: Harness<Tx>) => Promise<void>,
  options: TargetFixtureOptions = {},
): Promise<void> {
  const fx = await make(options);
  const store = createMemoryStore();
  const consumers: Consumer[] = [];
  const table = `out_${randomSuffix()}`;
  const name = randomConsumer('c');
  try {
    await fx.createTable(table);
    const h: Harness<Tx> = {
      store,
      fx,
      table,
      name,
      consumer: (options = {}) => {
        const { handle, handleBatch, ...rest } = options;
        // A test giving `handleBatch` gets no default `handle`.
        const handler: HandlerOption<Tx> = handleBatch ? { handleBatch } : { handle: handle ?? h.addAmount };
        const c = createConsumer<Tx>({
          name,
          source: store,
          target: fx.target,
          reconnect: { initialDelayMs: 5, maxDelayMs: 20 },
          ...rest,
          ...handler,
          onError: { initialDelayMs: 1, maxDelayMs: 5, ...options.onError },
        });
        consumers.push(c);
        return c;
      },
      addAmount: (e, ctx) => fx.add(ctx.tx, table, e.stream, (e.data as { amount: number }).amount),
      appendAmounts: async (streams, perStream, metadata) => {
        const expected = new Map<string, number>();
        for (let i = 1; i <= perStream; i++) {
          for (const s of streams) {
            const amount = i * 10 + (s.length % 7);
            await store.append(s, [
              { type: 'amount.added', data: { amount }, ...(metadata ? { metadata: metadata(s, i) } : {}) },
            ]);
            expected.set(s, (expected.get(s) ?? 0) + amount);
          }
        }
        return expected;
      },
      totals: async () => new Map([...(await fx.totals(table))].map(([s, t]) => [s, t.total])),
    };
    await fn(h);
  } finally {
    for (const c of consumers) await c.stop().catch(() => undefined);
    await store.close();
    await fx.cleanup();
  }
}
