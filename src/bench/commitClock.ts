import type { ConsumerTarget, TargetCheckpoint, TargetTransaction } from '../core/consumerTarget.js';

/**
 * Milliseconds on the system's monotonic clock (`process.hrtime`, CLOCK_MONOTONIC on Linux), which
 * every process of the machine shares: a time taken in the server's process and one taken in the
 * consumer's process can be subtracted. (`performance.now()` counts from each process's own start.)
 */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/**
 * Wraps a consumer target to time end-to-end latency: handlers `mark` the events they handled, and
 * when the batch's transaction has committed, the commit time of each marked event is recorded
 * (`committedAt`, on `monotonicMs`). The latency of an event is its commit time minus the time it was
 * handed to `append`, which the producer records (possibly in another process).
 */
export class CommitClock<Tx> implements ConsumerTarget<Tx> {
  readonly kind: string;
  /** When the transaction holding each event's (by id) handler output committed. */
  readonly committedAt = new Map<string, number>();
  private pending = new Set<string>();

  constructor(private readonly inner: ConsumerTarget<Tx>) {
    this.kind = inner.kind;
  }

  /** Called by the handler for each event it applied in the current transaction. */
  mark(id: string): void {
    this.pending.add(id);
  }

  /** How many events have committed output. */
  get committed(): number {
    return this.committedAt.size;
  }

  /** Latency of each sent event, in send order: commit time minus send time (`sentAt[i]` for `ids[i]`). */
  latencies(ids: readonly string[], sentAt: readonly number[]): number[] {
    return ids.map((id, i) => {
      const at = this.committedAt.get(id);
      if (at === undefined) throw new Error(`live-latency: event ${id} has no committed output`);
      return at - sentAt[i]!;
    });
  }

  migrate(): Promise<void> {
    return this.inner.migrate();
  }

  async transaction<T>(fn: (t: TargetTransaction<Tx>) => Promise<T>): Promise<T> {
    this.pending.clear();
    try {
      const result = await this.inner.transaction(fn);
      const now = monotonicMs();
      for (const id of this.pending) if (!this.committedAt.has(id)) this.committedAt.set(id, now);
      return result;
    } finally {
      this.pending.clear();
    }
  }

  readCheckpoint(consumer: string): Promise<TargetCheckpoint> {
    return this.inner.readCheckpoint(consumer);
  }

  ledgerSize(consumer: string): Promise<number> {
    return this.inner.ledgerSize(consumer);
  }

  counterValue(counter: string): Promise<number> {
    return this.inner.counterValue(counter);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
