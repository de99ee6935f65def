import { isIdemError } from '../core/errors.js';
import type { ShredRecord } from '../core/eventStore.js';
import { streamPartition } from '../core/streamHash.js';
import { parseVersionedName } from '../core/versionedName.js';
import type { ResolvedOptions } from './options.js';

/** The shred log is read at most this often while the consumer runs (and at start). */
export const SHRED_POLL_MS = 1000;
/** Shred log entries read per request. */
const SHRED_PAGE = 100;

/**
 * Crypto-shredding on the consumer side: follows the source's shred log (`store.shreds`) from the
 * cursor kept in the target and, for each shredded stream the consumer (or its partition) owns, in
 * one target transaction: deletes the stream's entity version and ledger rows, calls `onShred`,
 * and advances the cursor. Runs between batches, never beside one.
 */
export class ShredFollower<Tx> {
  private lastPollMs = 0;
  private running: Promise<void> | null = null;
  /** The source refused the log (a remote token limited to some streams): not asked again. */
  private refused = false;
  /** The last failure (source unreachable, `onShred` threw); the next poll tries again. */
  lastError: Error | null = null;
  private readonly version: number | null;
  private readonly tableSuffix: string;

  constructor(private readonly o: ResolvedOptions<Tx>) {
    ({ version: this.version, tableSuffix: this.tableSuffix } = parseVersionedName(o.name));
  }

  /** The source keeps a shred log and the target can forget entities. */
  get enabled(): boolean {
    const t = this.o.target;
    return !this.refused && typeof this.o.source.shreds === 'function' && typeof t.shredCursor === 'function';
  }

  /** Resolves once no follow is running. */
  idle(): Promise<void> {
    return this.running ?? Promise.resolve();
  }

  /** Follows the log when `SHRED_POLL_MS` passed since the last time (or with `force`). Never rejects. */
  poll(force = false): Promise<void> {
    if (this.running) return this.running;
    if (!this.enabled || (!force && Date.now() - this.lastPollMs < SHRED_POLL_MS)) return Promise.resolve();
    this.lastPollMs = Date.now();
    this.running = this.follow().then(
      () => {
        this.lastError = null;
      },
      (err: unknown) => {
        if (isIdemError(err, 'forbidden')) this.refused = true;
        else this.lastError = err instanceof Error ? err : new Error(String(err));
      },
    );
    void this.running.finally(() => (this.running = null));
    return this.running;
  }

  private async follow(): Promise<void> {
    const { source, target, targetName } = this.o;
    let cursor = await target.shredCursor!(targetName);
    for (;;) {
      const page = await source.shreds!(cursor, SHRED_PAGE);
      for (const r of page) {
        await this.forget(r);
        cursor = r.seq;
      }
      if (page.length < SHRED_PAGE) return;
    }
  }

  /** One entry in one target transaction: the entity forgotten (when ours) and the cursor moved. */
  private async forget(r: ShredRecord): Promise<void> {
    const o = this.o;
    const partition = o.filter.partition;
    const ours = !partition || streamPartition(r.stream, partition.count) === partition.index;
    const positions: number[] = [];
    if (ours && o.source.readStream)
      for await (const e of o.source.readStream(r.stream)) positions.push(e.position);
    await o.target.transaction(async (t) => {
      if (ours) {
        await t.forgetEntity?.(o.targetName, r.stream, positions);
        await o.onShred?.(r.stream, {
          tx: t.tx,
          consumer: o.name,
          subject: r.subject,
          version: this.version,
          tableSuffix: this.tableSuffix,
        });
      }
      await t.setShredCursor?.(o.targetName, r.seq);
    });
  }
}
