import type Database from 'better-sqlite3';
import type { AppendResult } from '../core/event.js';
import { IdemError, StorageFullError, WrongExpectedVersionError } from '../core/errors.js';
import { satisfies, type ExpectedVersion } from '../core/expectedVersion.js';
import { resolveIdempotentAppend, type ExistingEvent } from '../core/idempotency.js';
import type { PreparedEvent } from '../core/validation.js';
import { selectByIds, toExistingEvent } from './eventRows.js';

interface PendingAppend {
  stream: string;
  events: PreparedEvent[];
  expected: ExpectedVersion;
  resolve: (result: AppendResult) => void;
  reject: (err: unknown) => void;
}

type Outcome = { ok: true; result: AppendResult } | { ok: false; error: unknown };

/** A small write of another kind (a subscription's ack) that shares the next group transaction. */
interface PendingWrite {
  run: () => unknown;
  resolve: (result: unknown) => void;
  reject: (err: unknown) => void;
}

type WriteOutcome = { ok: true; result: unknown } | { ok: false; error: unknown };

/** Most events committed by one group transaction; the rest wait for the next one. */
const MAX_EVENTS_PER_COMMIT = 20_000;
/** Attempts at taking the write lock (each waits up to the busy timeout) before giving up. */
const BUSY_ATTEMPTS = 3;

/**
 * Group commit: appends queued during one turn of the event loop are written in a single IMMEDIATE
 * transaction and share one fsync. Each append runs in its own savepoint, so its expected-version
 * check, idempotency check and result are its own, and its failure rolls back only its rows.
 */
export class AppendBatcher {
  private queue: PendingAppend[] = [];
  private writes: PendingWrite[] = [];
  private scheduled = false;
  private idle: Promise<void> = Promise.resolve();
  private markIdle: (() => void) | null = null;
  private readonly headStmt: Database.Statement;
  private readonly versionStmt: Database.Statement;
  private readonly insertStmt: Database.Statement;
  private readonly appendTx: (p: PendingAppend, head: number, recordedAt: string) => AppendResult;
  private readonly writeTx: (w: PendingWrite) => unknown;

  constructor(
    private readonly db: Database.Database,
    private readonly onCommit: (head: number) => void,
  ) {
    this.headStmt = db.prepare('SELECT coalesce(max(position), 0) AS h FROM idem_events');
    this.versionStmt = db.prepare('SELECT coalesce(max(version), 0) AS v FROM idem_events WHERE stream = ?');
    this.insertStmt = db.prepare(
      'INSERT INTO idem_events (position, id, stream, version, type, data, metadata, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    );
    // Called inside the group transaction, better-sqlite3 runs this as a savepoint.
    this.appendTx = db.transaction((p: PendingAppend, head: number, recordedAt: string) => this.appendOne(p, head, recordedAt));
    this.writeTx = db.transaction((w: PendingWrite) => w.run());
  }

  enqueue(stream: string, events: PreparedEvent[], expected: ExpectedVersion): Promise<AppendResult> {
    return new Promise((resolve, reject) => {
      this.queue.push({ stream, events, expected, resolve, reject });
      this.schedule();
    });
  }

  /**
   * Runs `fn` inside the next group transaction, in its own savepoint (a throw rolls back only its
   * writes and rejects), and resolves with its result once that transaction has committed: a write
   * made while appends are waiting shares their commit and its fsync instead of adding its own. With
   * no append waiting it commits alone on the next turn of the event loop.
   */
  enqueueWrite<T>(fn: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.writes.push({ run: fn, resolve: resolve as (result: unknown) => void, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    this.idle = new Promise((r) => (this.markIdle = r));
    setImmediate(() => this.flush());
  }

  /** Resolves once every queued append has been committed or rejected. */
  drain(): Promise<void> {
    return this.idle;
  }

  private flush(): void {
    const batch: PendingAppend[] = [];
    let events = 0;
    while (this.queue.length > 0 && (batch.length === 0 || events + this.queue[0]!.events.length <= MAX_EVENTS_PER_COMMIT)) {
      const next = this.queue.shift()!;
      batch.push(next);
      events += next.events.length;
    }
    const writes = this.writes;
    this.writes = [];
    const [outcomes, writeOutcomes] = this.commit(batch, writes);
    if (this.queue.length > 0 || this.writes.length > 0) {
      setImmediate(() => this.flush());
    } else {
      this.scheduled = false;
      this.markIdle?.();
    }
    for (let i = 0; i < batch.length; i++) {
      const o = outcomes[i]!;
      if (o.ok) batch[i]!.resolve(o.result);
      else batch[i]!.reject(o.error);
    }
    for (let i = 0; i < writes.length; i++) {
      const o = writeOutcomes[i]!;
      if (o.ok) writes[i]!.resolve(o.result);
      else writes[i]!.reject(o.error);
    }
  }

  private commit(batch: PendingAppend[], writes: PendingWrite[]): [Outcome[], WriteOutcome[]] {
    for (let attempt = 1; ; attempt++) {
      try {
        let head = 0;
        const outcomes = this.db
          .transaction((): [Outcome[], WriteOutcome[]] => {
            head = (this.headStmt.get() as { h: number }).h;
            const recordedAt = new Date().toISOString();
            const appended = batch.map((p): Outcome => {
              try {
                const result = this.appendTx(p, head, recordedAt);
                if (!result.duplicate) head = result.lastPosition;
                return { ok: true, result };
              } catch (error) {
                if (isStorageFull(error)) throw error;
                return this.resolveFailure(p, error);
              }
            });
            const written = writes.map((w): WriteOutcome => {
              try {
                return { ok: true, result: this.writeTx(w) };
              } catch (error) {
                if (isStorageFull(error)) throw error;
                return { ok: false, error: mapSqliteError(error) };
              }
            });
            return [appended, written];
          })
          .immediate();
        if (outcomes[0].some((o) => o.ok && !o.result.duplicate)) this.onCommit(head);
        return outcomes;
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code === 'SQLITE_BUSY' && attempt < BUSY_ATTEMPTS) continue;
        const error = mapSqliteError(err);
        return [batch.map(() => ({ ok: false as const, error })), writes.map(() => ({ ok: false as const, error }))];
      }
    }
  }

  /** Appends one call's events inside its savepoint, or returns the original result of a duplicate. */
  private appendOne(p: PendingAppend, head: number, recordedAt: string): AppendResult {
    const current = (this.versionStmt.get(p.stream) as { v: number }).v;
    if (!satisfies(p.expected, current)) {
      const duplicate = this.findDuplicate(p);
      if (duplicate) return duplicate;
      throw new WrongExpectedVersionError(p.stream, p.expected, current);
    }
    p.events.forEach((e, i) => {
      this.insertStmt.run(head + i + 1, e.id, p.stream, current + i + 1, e.type, e.dataJson, e.metadataJson, recordedAt);
    });
    return {
      stream: p.stream,
      version: current + p.events.length,
      firstPosition: head + 1,
      lastPosition: head + p.events.length,
      duplicate: false,
      ids: p.events.map((e) => e.id),
    };
  }

  /** After an insert hit a unique id: the original result of a duplicate append, or the conflict. */
  private resolveFailure(p: PendingAppend, error: unknown): Outcome {
    const code = (error as { code?: string }).code;
    if (code !== 'SQLITE_CONSTRAINT_UNIQUE' && code !== 'SQLITE_CONSTRAINT_PRIMARYKEY') {
      return { ok: false, error: mapSqliteError(error) };
    }
    try {
      const duplicate = this.findDuplicate(p);
      return duplicate ? { ok: true, result: duplicate } : { ok: false, error: mapSqliteError(error) };
    } catch (conflict) {
      return { ok: false, error: conflict };
    }
  }

  private findDuplicate(p: PendingAppend): AppendResult | null {
    const existing = new Map<string, ExistingEvent>();
    for (const row of selectByIds(this.db, p.events.map((e) => e.id))) existing.set(row.id, toExistingEvent(row));
    return resolveIdempotentAppend(p.stream, p.events, existing);
  }
}

function isStorageFull(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === 'SQLITE_FULL' || code === 'SQLITE_IOERR_WRITE' || code === 'SQLITE_IOERR_FSYNC';
}

export function mapSqliteError(err: unknown): unknown {
  if (err instanceof IdemError) return err;
  const code = (err as { code?: string }).code;
  if (isStorageFull(err)) {
    return new StorageFullError(`the database disk is full or failing (${code}); nothing of this append was written`, {
      cause: err,
    });
  }
  if (code === 'SQLITE_BUSY') {
    return new IdemError('unavailable', 'the database file stayed locked by another process; nothing was written', {}, {
      cause: err,
    });
  }
  return err;
}
