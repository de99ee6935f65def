import type { ConsumerTarget, TargetCheckpoint, TargetTransaction } from '../core/consumerTarget.js';

/**
 * Wraps a consumer target to time end-to-end latency: handlers `mark` the events they handled, and
 * when the batch's transaction has committed, each marked event's latency since it was sent is recorded.
 */
export class CommitClock<Tx> implements ConsumerTarget<Tx> {
  readonly kind: string;
  /** When each event (by id) was handed to `append`. */
  readonly sentAt = new Map<string, number>();
  /** Milliseconds from append call to committed handler output, in commit order. */
  readonly latencies: number[] = [];
  private pending = new Set<string>();

  constructor(private readonly inner: ConsumerTarget<Tx>) {
    this.kind = inner.kind;
  }

  /** Called by the handler for each event it applied in the current transaction. */
  mark(id: string): void {
    this.pending.add(id);
  }

  migrate(): Promise<void> {
    return this.inner.migrate();
  }

  async transaction<T>(fn: (t: TargetTransaction<Tx>) => Promise<T>): Promise<T> {
    this.pending.clear();
    try {
      const result = await this.inner.transaction(fn);
      const now = performance.now();
      for (const id of this.pending) {
        const sent = this.sentAt.get(id);
        if (sent !== undefined) this.latencies.push(now - sent);
      }
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
