/**
 * The target port: the database where a consumer's handler output, its dedup ledger, its entity
 * versions and its checkpoint commit together. Implemented by `sqliteTarget` and `postgresTarget`;
 * the consumer runtime codes against this port only. No I/O here.
 */

import type { OutboxDialect } from './effectOutbox.js';

/** One dedup marker: a guard key of a handled event, with the event's position (for diagnosis). */
export interface LedgerEntry {
  key: string;
  position: number;
}

/** The consumer's checkpoint as the target stored it: last committed position and the owner epoch that wrote it. */
export interface TargetCheckpoint {
  position: number;
  epoch: number;
}

/** What a batch writes besides the handler's own output, all in the batch's transaction. */
export interface BatchRecord {
  /** New ledger rows; none of them may exist yet. */
  entries: readonly LedgerEntry[];
  /** Per-stream last applied versions (entity-version guard). */
  versions: ReadonlyMap<string, number>;
  /** The checkpoint position; never moves the stored one backwards. */
  position: number;
  /** The epoch of the subscription that owns the consumer. */
  epoch: number;
}

/**
 * An open target transaction for one batch. `tx` is what handlers see as `ctx.tx`. Every method runs
 * inside the transaction; nothing is visible to others before the transaction commits.
 */
export interface TargetTransaction<Tx> {
  readonly tx: Tx;
  /** Reads the consumer's checkpoint and locks it for this transaction (0/0 when none). */
  checkpoint(consumer: string): Promise<TargetCheckpoint>;
  /** Which of `keys` the consumer's ledger already holds. One query. */
  processedKeys(consumer: string, keys: readonly string[]): Promise<Set<string>>;
  /** The consumer's last applied version of each of `streams` that has one. One query. */
  entityVersions(consumer: string, streams: readonly string[]): Promise<Map<string, number>>;
  /** Starts a savepoint around one event's work. */
  savepoint(): Promise<void>;
  /** Keeps the work since `savepoint()`. */
  releaseSavepoint(): Promise<void>;
  /** Undoes the work since `savepoint()` and ends the savepoint. */
  rollbackToSavepoint(): Promise<void>;
  /** Writes ledger rows, entity versions and the checkpoint. */
  record(consumer: string, record: BatchRecord): Promise<void>;
  /**
   * Adds `amount` to the counter `counter` unless `member` was already counted for it (set membership):
   * an additive metric that cannot double on redelivery or replay. Returns whether it was counted.
   */
  addOnce(counter: string, member: string, amount: number): Promise<boolean>;
  /**
   * Crypto-shredding: forgets the consumer's entity `stream`, whose events' data was erased: deletes
   * its entity version and the ledger rows of the events at `positions`.
   */
  forgetEntity?(consumer: string, stream: string, positions: readonly number[]): Promise<void>;
  /** Moves the consumer's shred cursor (the last shred log entry handled) to `seq`, never backwards. */
  setShredCursor?(consumer: string, seq: number): Promise<void>;
  /**
   * `ConsumerTarget.pruneLedger` inside this transaction: bounded by the checkpoint as this
   * transaction sees it, and undone with it on rollback.
   */
  pruneLedger?(consumer: string, options?: PruneLedgerOptions): Promise<PruneLedgerResult>;
}

/** What `pruneLedger` may delete. */
export interface PruneLedgerOptions {
  /** Keeps the ledger rows of the newest `keep` handled events at or below the checkpoint (0-10000000). @default 0 */
  keep?: number;
  /** Prunes no row above this position (the runtime passes its acknowledged position). @default the checkpoint */
  through?: number;
}

/** What `pruneLedger` did. */
export interface PruneLedgerResult {
  /** Ledger rows deleted. */
  deleted: number;
  /** The pruned horizon afterwards: rows at or below it may be gone (0 when nothing was ever pruned). */
  horizon: number;
}

export interface ConsumerTarget<Tx> {
  /** `sqlite` or `postgres`; for messages and metrics. */
  readonly kind: string;
  /** Creates or upgrades the target's tables. Idempotent and safe when several processes start at once. */
  migrate(): Promise<void>;
  /** Runs `fn` in one transaction: commits when it resolves, rolls back when it throws (and rethrows). */
  transaction<T>(fn: (t: TargetTransaction<Tx>) => Promise<T>): Promise<T>;
  /** The consumer's committed checkpoint, without locking (0/0 when none). */
  readCheckpoint(consumer: string): Promise<TargetCheckpoint>;
  /** How many ledger rows the consumer has. */
  ledgerSize(consumer: string): Promise<number>;
  /**
   * Deletes the consumer's ledger rows whose events the checkpoint covers (at or below it, and at or
   * below `through`), keeping the newest `keep` events' rows, in one transaction, and records the
   * pruned horizon. See docs/data-lifecycle.md.
   */
  pruneLedger?(consumer: string, options?: PruneLedgerOptions): Promise<PruneLedgerResult>;
  /** The consumer's pruned horizon: its ledger rows at or below it may be gone (0 when never pruned). */
  ledgerHorizon?(consumer: string): Promise<number>;
  /** The last shred log entry the consumer handled (0 when none). See `TargetTransaction.setShredCursor`. */
  shredCursor?(consumer: string): Promise<number>;
  /** The value of an `addOnce` counter (0 when unknown). */
  counterValue(counter: string): Promise<number>;
  /** Closes what the target opened itself (not a database or pool that was handed to it). Safe to call twice. */
  close(): Promise<void>;
  /** The effect outbox, version and active-version tables of this target, used inside its transactions (`ctx.effect`, dispatchers). Optional: a target without one refuses `ctx.effect`. */
  readonly outbox?: OutboxDialect<Tx>;
}
