import { setTimeout as delay } from 'node:timers/promises';
import type { ConsumerTarget } from '../core/consumerTarget.js';
import type { ConsumerSource } from '../core/consumerSource.js';
import {
  createConsumer,
  type BatchHandler,
  type BatchOptions,
  type Consumer,
  type Guard,
  type Handler,
} from '../consumer/index.js';
import type { LedgerOptions } from '../core/ledgerRetention.js';
import { timed, type Timed } from './measure.js';

export interface ConsumerRunSpec<Tx> {
  name: string;
  source: ConsumerSource;
  target: ConsumerTarget<Tx>;
  /** The per-event handler, or (`handleBatch`) the batch handler: exactly one. */
  handle?: Handler<Tx>;
  handleBatch?: BatchHandler<Tx>;
  /** @default ['event-id', 'entity-version'] (ledger rows and entity versions) */
  guard?: Guard[];
  /** The consumer's batch options. @default the consumer's defaults (pages of 500, catch-up transactions of up to 5,000) */
  batch?: BatchOptions;
  /** The consumer's ledger retention. @default every row kept */
  ledger?: LedgerOptions;
}

/** Waits (polling the in-memory status, so the wait itself costs nothing measurable) until the consumer acked `position`. */
export async function waitForPosition(
  consumer: Consumer,
  position: number,
  timeoutMs = 600_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = consumer.status();
    if (s.position >= position) return;
    if (s.state === 'failed' || s.state === 'stopped') {
      throw new Error(
        `consumer ${s.name} ${s.state} at ${s.position}: ${s.lastError?.message ?? 'no error'}`,
      );
    }
    if (Date.now() > deadline) throw new Error(`consumer ${s.name} stuck at ${s.position} of ${position}`);
    await delay(2);
  }
}

/** Starts a consumer, times it from start until it acknowledged the source's head, and stops it. */
export async function timeConsumer<Tx>(spec: ConsumerRunSpec<Tx>, events: number): Promise<Timed> {
  const head = await spec.source.headPosition();
  const consumer = createConsumer<Tx>({
    name: spec.name,
    source: spec.source,
    target: spec.target,
    guard: spec.guard ?? ['event-id', 'entity-version'],
    ...(spec.handleBatch ? { handleBatch: spec.handleBatch } : { handle: spec.handle as Handler<Tx> }),
    ...(spec.batch ? { batch: spec.batch } : {}),
    ...(spec.ledger ? { ledger: spec.ledger } : {}),
  });
  try {
    return await timed(events, async () => {
      await consumer.start();
      await waitForPosition(consumer, head);
    });
  } finally {
    await consumer.stop();
  }
}
