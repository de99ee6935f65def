import type { Pool } from 'pg';
import type { ExpectedVersion } from '../core/expectedVersion.js';
import type { PreparedEvent } from '../core/validation.js';
import { isConnectionFault } from './connectionFaults.js';

/** What `append_batch` decided for one append. */
export type BatchOutcome =
  | { kind: 'ok'; version: number; firstPosition: number; lastPosition: number }
  /** One of its ids is already stored; nothing was written. */
  | { kind: 'exists' }
  | { kind: 'wrong_expected_version'; actual: number };

interface Pending {
  stream: string;
  expected: ExpectedVersion;
  events: readonly PreparedEvent[];
  resolve: (outcome: BatchOutcome) => void;
  reject: (err: unknown) => void;
}

export interface AppendBatcherOptions {
  pool: Pool;
  /** The quoted schema. */
  s: string;
  /** Most events written by one statement. @default 10000 */
  maxBatchEvents?: number;
}

/**
 * Group commit for appends. Appends are serialised by the position allocator until they commit, so
 * each commit's flush to disk would cap throughput at one append per flush. Instead, appends that
 * arrive while a statement is in flight wait and then go together in the next `append_batch` call:
 * one round trip, one transaction, one flush for all of them. Each still gets its own outcome, and a
 * failing batch is retried one append at a time, so one bad append cannot fail its neighbours.
 */
export class AppendBatcher {
  private queue: Pending[] = [];
  private running = false;
  private readonly maxBatchEvents: number;

  constructor(private readonly options: AppendBatcherOptions) {
    this.maxBatchEvents = options.maxBatchEvents ?? 10_000;
  }

  submit(stream: string, expected: ExpectedVersion, events: readonly PreparedEvent[]): Promise<BatchOutcome> {
    return new Promise<BatchOutcome>((resolve, reject) => {
      this.queue.push({ stream, expected, events, resolve, reject });
      if (!this.running) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.running = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.take();
        try {
          const outcomes = await this.run(batch);
          batch.forEach((p, i) => p.resolve(outcomes[i]!));
        } catch (err) {
          // A lost connection leaves every append of the batch with an unknown outcome: each caller
          // retries its own (and so learns that the outcome was unknown).
          if (batch.length === 1 || isConnectionFault(err)) {
            for (const p of batch) p.reject(err);
            continue;
          }
          // Find the culprit: every append alone.
          for (const p of batch) {
            try {
              p.resolve((await this.run([p]))[0]!);
            } catch (e) {
              p.reject(e);
            }
          }
        }
      }
    } finally {
      this.running = false;
    }
  }

  private take(): Pending[] {
    let events = 0;
    let n = 0;
    while (n < this.queue.length) {
      const size = this.queue[n]!.events.length;
      if (n > 0 && events + size > this.maxBatchEvents) break;
      events += size;
      n++;
    }
    return this.queue.splice(0, n);
  }

  private async run(batch: readonly Pending[]): Promise<BatchOutcome[]> {
    const events = batch.flatMap((p) => p.events);
    const r = await this.options.pool.query<{
      outcome: string;
      version: number | null;
      first_position: string | null;
      last_position: string | null;
    }>(
      `SELECT outcome, version, first_position, last_position
         FROM ${this.options.s}.append_batch($1::text[], $2::text[], $3::int[], $4::uuid[], $5::text[], $6::text[], $7::text[])`,
      [
        batch.map((p) => p.stream),
        batch.map((p) => String(p.expected)),
        batch.map((p) => p.events.length),
        events.map((e) => e.id),
        events.map((e) => e.type),
        events.map((e) => e.dataJson),
        events.map((e) => e.metadataJson),
      ],
    );
    if (r.rows.length !== batch.length)
      throw new Error(`append_batch returned ${r.rows.length} outcomes for ${batch.length} appends`);
    return r.rows.map((row): BatchOutcome => {
      if (row.outcome === 'ok') {
        return {
          kind: 'ok',
          version: row.version!,
          firstPosition: Number(row.first_position),
          lastPosition: Number(row.last_position),
        };
      }
      if (row.outcome === 'wrong_expected_version')
        return { kind: 'wrong_expected_version', actual: row.version! };
      return { kind: 'exists' };
    });
  }
}
