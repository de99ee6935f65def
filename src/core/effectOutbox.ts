import type {
  ActiveVersionRecord,
  ClaimedEffect,
  ConsumerVersionRecord,
  EffectCounts,
  EffectRecord,
  EffectStatus,
  NewEffect,
} from './effectTypes.js';

export interface ClaimRequest {
  owner: string;
  /** Only rows of these kinds (the ones the dispatcher has handlers for). */
  kinds: readonly string[];
  leaseMs: number;
  limit: number;
}

export interface ListRequest {
  status?: EffectStatus;
  scope?: string;
  limit: number;
}

/** What `resetLedger` removed. */
export interface LedgerReset {
  ledgerRows: number;
  checkpoints: number;
  entityVersions: number;
}

/**
 * The outbox, version and active-version tables of one target dialect. Every method runs on the
 * target's open transaction `tx` (a better-sqlite3 Database inside BEGIN, or a pg client inside BEGIN),
 * so callers wrap them in `target.transaction(...)`, or call them from a handler on `ctx.tx`.
 */
export interface OutboxDialect<Tx> {
  /** Inserts the row unless (scope, key) exists; true when inserted. */
  insert(tx: Tx, effect: NewEffect): Promise<boolean>;
  /** Records a consumer version unless it is known; returns the stored record either way. */
  registerVersion(tx: Tx, v: Omit<ConsumerVersionRecord, 'createdAt'>): Promise<ConsumerVersionRecord>;
  getVersion(tx: Tx, consumer: string): Promise<ConsumerVersionRecord | null>;
  listVersions(tx: Tx): Promise<ConsumerVersionRecord[]>;
  /** Leases up to `limit` due pending rows nobody holds (or whose lease expired) and counts an attempt on each. */
  claim(tx: Tx, req: ClaimRequest): Promise<ClaimedEffect[]>;
  /** Extends the lease of a row this owner still holds; false when it no longer does. */
  extendLease(tx: Tx, id: number, owner: string, leaseMs: number): Promise<boolean>;
  /** Marks a claimed row done with the handler's result (JSON); false when the lease was lost meanwhile. */
  complete(tx: Tx, id: number, owner: string, result: string): Promise<boolean>;
  /** Gives a claimed row back after a failure: pending again after `retryInMs`, or `failed` when null. */
  release(tx: Tx, id: number, owner: string, error: string, retryInMs: number | null): Promise<boolean>;
  list(tx: Tx, req: ListRequest): Promise<EffectRecord[]>;
  get(tx: Tx, scope: string, key: string): Promise<EffectRecord | null>;
  /** Makes one failed or suppressed row (or every failed row) pending again with a fresh attempt count. */
  retry(tx: Tx, which: { scope: string; key: string } | 'all-failed'): Promise<number>;
  counts(tx: Tx): Promise<EffectCounts>;
  getActive(tx: Tx, base: string): Promise<ActiveVersionRecord | null>;
  listActive(tx: Tx): Promise<ActiveVersionRecord[]>;
  setActive(
    tx: Tx,
    record: Omit<ActiveVersionRecord, 'promotedAt' | 'previous'>,
  ): Promise<ActiveVersionRecord>;
  /** Deletes the consumer's ledger rows, checkpoint and entity versions (never the outbox). */
  resetLedger(tx: Tx, consumer: string): Promise<LedgerReset>;
}

export function emptyCounts(): EffectCounts {
  return { pending: 0, done: 0, failed: 0, suppressed: 0 };
}

export function parseJson(text: string | null): unknown {
  if (text === null) return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
