import type Database from 'better-sqlite3';
import type { AppendResult } from '../core/event.js';
import { IdemError, StorageFullError, WrongExpectedVersionError } from '../core/errors.js';
import { satisfies, type ExpectedVersion } from '../core/expectedVersion.js';
import { resolveIdempotentAppend, type ExistingEvent } from '../core/idempotency.js';
import type { PreparedEvent } from '../core/validation.js';
import { selectByIds, toExistingEvent } from './eventRows.js';
import { RowInserter } from './rowInserter.js';
import { streamHash } from '../core/streamHash.js';

interface PendingAppend {
  stream: string;
  events: PreparedEvent[];
  expected: ExpectedVersion;
  resolve: (result: AppendResult) => void;
  reject: (err: unknown) => void;
}

/** An append decided in an optimistic group, to be written after position `head` and version `current`. */
interface Planned {
  p: PendingAppend;
  head: number;
  current: number;
}

type Outcome = { ok: true; result: AppendResult } | { ok: false; error: unknown };

/** A small write of another kind (a subscription's ack) that shares the next group transaction. */
interface PendingWrite {
  run: () => unknown;
  resolve: (result: unknown) => void;
  reject: (err: unknown) => void;
}

type WriteOutcome = { ok: true; result: unknown } | { ok: false; error: unknown };

interface GroupResult {
  /** The head position after the group's appends. */
  head: number;
  outcomes: Outcome[];
  writeOutcomes: WriteOutcome[];
  /** `PRAGMA data_version` when the group began: unchanged by this connection's own commits. */
  dataVersion: number;
  /** The version of every stream the group read or wrote, as of its commit. */
  versions: Map<string, number>;
}

/**
 * What this connection knows of the log as of its last group commit: the head and the versions of
 * recently appended streams. Valid while no other connection has committed to the file since, which
 * `PRAGMA data_version` tells (it changes only for other connections' commits); checked inside the
 * write transaction, so no other writer can slip in between the check and the group's inserts.
 */
interface KnownLog {
  dataVersion: number;
  head: number;
  versions: Map<string, number>;
}

/**
 * A group transaction in progress: the log as it stood when the group began (over `known` when that
 * is still valid) and the version of every stream the group has read or written so far.
 */
interface Group {
  dataVersion: number;
  known: KnownLog | null;
  /** The head position when the group began. */
  head: number;
  versions: Map<string, number>;
  recordedAt: string;
}

/** Streams whose versions are kept between groups; beyond this the map starts over. */
const MAX_KNOWN_STREAMS = 100_000;

/** Most events committed by one group transaction; the rest wait for the next one. */
const MAX_EVENTS_PER_COMMIT = 20_000;
/** Attempts at taking the write lock (each waits up to the busy timeout) before giving up. */
const BUSY_ATTEMPTS = 3;

/** Thrown inside an optimistic group transaction to roll it back and rerun the group in savepoints. */
const NEEDS_SAVEPOINTS = new Error('internal: rerun the group with a savepoint per append');

/**
 * Group commit: appends queued during one turn of the event loop are written in a single IMMEDIATE
 * transaction and share one fsync. Each append keeps its own expected-version check, idempotency
 * check and result, and its failure writes none of its rows.
 *
 * A group is first written optimistically, without a savepoint per append: an append whose expected
 * version fails is decided before it writes anything, so only an insert that throws (an id already
 * stored: a retried append or a collision; a full disk) can leave an append half-written. Then the
 * whole transaction is rolled back, nothing of it having been committed or acknowledged, and the
 * group is written again with each append in its own savepoint, so that the failure rolls back only
 * that append's rows. Writes queued by `enqueueWrite` run after the appends, each in its own savepoint.
 */
export class AppendBatcher {
  private queue: PendingAppend[] = [];
  private writes: PendingWrite[] = [];
  private scheduled = false;
  /** `drain()` callers, resolved once nothing is queued (a promise per drain, not per group). */
  private idleWaiters: (() => void)[] = [];
  private readonly headStmt: Database.Statement;
  private readonly versionStmt: Database.Statement;
  private readonly insertRows: RowInserter;
  private readonly appendTx: (group: Group, p: PendingAppend, head: number) => AppendResult;
  private readonly writeTx: (w: PendingWrite) => unknown;
  private readonly optimisticGroup: Database.Transaction<
    (batch: PendingAppend[], writes: PendingWrite[]) => GroupResult
  >;
  private readonly isolatedGroup: Database.Transaction<
    (batch: PendingAppend[], writes: PendingWrite[]) => GroupResult
  >;
  private readonly dataVersionStmt: Database.Statement;
  private known: KnownLog | null = null;

  constructor(
    private readonly db: Database.Database,
    private readonly onCommit: (head: number) => void,
  ) {
    this.headStmt = db.prepare('SELECT coalesce(max(position), 0) FROM idem_events').pluck();
    this.versionStmt = db
      .prepare('SELECT coalesce(max(version), 0) FROM idem_events WHERE stream = ?')
      .pluck();
    this.dataVersionStmt = db.prepare('PRAGMA data_version').pluck();
    this.insertRows = new RowInserter(
      db,
      'INSERT INTO idem_events (position, id, stream, version, type, data, metadata, recorded_at, stream_hash)',
      9,
    );
    // Called inside the group transaction, better-sqlite3 runs this as a savepoint.
    this.appendTx = db.transaction((group: Group, p: PendingAppend, head: number) =>
      this.appendOne(group, p, head),
    );
    this.writeTx = db.transaction((w: PendingWrite) => w.run());
    this.optimisticGroup = db.transaction((batch: PendingAppend[], writes: PendingWrite[]) =>
      this.writeOptimistic(batch, writes),
    );
    this.isolatedGroup = db.transaction((batch: PendingAppend[], writes: PendingWrite[]) =>
      this.writeIsolated(batch, writes),
    );
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
   * no append waiting it commits alone on the next turn of the event loop. `fn` must only run SQL:
   * when a group is rerun with a savepoint per append, the rolled-back first run is repeated.
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
    setImmediate(() => this.flush());
  }

  /** Resolves once every queued append has been committed or rejected. */
  drain(): Promise<void> {
    if (!this.scheduled) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** The appends of the next group: the whole queue, or as much of it as `MAX_EVENTS_PER_COMMIT` lets in. */
  private takeGroup(): PendingAppend[] {
    const queue = this.queue;
    let events = 0;
    let n = 0;
    while (n < queue.length && (n === 0 || events + queue[n]!.events.length <= MAX_EVENTS_PER_COMMIT)) {
      events += queue[n]!.events.length;
      n++;
    }
    if (n === queue.length) {
      this.queue = [];
      return queue;
    }
    return queue.splice(0, n);
  }

  private flush(): void {
    const batch = this.takeGroup();
    const writes = this.writes;
    this.writes = [];
    const { outcomes, writeOutcomes } = this.commit(batch, writes);
    if (this.queue.length > 0 || this.writes.length > 0) {
      setImmediate(() => this.flush());
    } else {
      this.scheduled = false;
      if (this.idleWaiters.length > 0) {
        const waiters = this.idleWaiters;
        this.idleWaiters = [];
        for (const resolve of waiters) resolve();
      }
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

  private commit(
    batch: PendingAppend[],
    writes: PendingWrite[],
  ): Pick<GroupResult, 'outcomes' | 'writeOutcomes'> {
    for (let attempt = 1; ; attempt++) {
      try {
        let group: GroupResult;
        try {
          group = this.optimisticGroup.immediate(batch, writes);
        } catch (err) {
          if (err !== NEEDS_SAVEPOINTS) throw err;
          group = this.isolatedGroup.immediate(batch, writes);
        }
        this.remember(group);
        if (group.outcomes.some((o) => o.ok && !o.result.duplicate)) this.onCommit(group.head);
        return group;
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code === 'SQLITE_BUSY' && attempt < BUSY_ATTEMPTS) continue;
        const error = mapSqliteError(err);
        return {
          outcomes: batch.map(() => ({ ok: false as const, error })),
          writeOutcomes: writes.map(() => ({ ok: false as const, error })),
        };
      }
    }
  }

  /** After a commit: what the group read and wrote stays known for the next group. */
  private remember(group: GroupResult): void {
    let known = this.known;
    if (!known || known.dataVersion !== group.dataVersion || known.versions.size > MAX_KNOWN_STREAMS) {
      known = { dataVersion: group.dataVersion, head: group.head, versions: new Map() };
      this.known = known;
    }
    known.head = group.head;
    for (const [stream, version] of group.versions) known.versions.set(stream, version);
  }

  /** The current version of `stream` inside the group transaction: from the group, what is known, or the table. */
  private currentVersion(group: Group, stream: string): number {
    let v = group.versions.get(stream) ?? group.known?.versions.get(stream);
    if (v === undefined) v = this.versionStmt.get(stream) as number;
    group.versions.set(stream, v);
    return v;
  }

  /** Opens a group inside its transaction: what is known of the log is used only while no other connection has committed. */
  private beginGroup(): Group {
    const dataVersion = this.dataVersionStmt.get() as number;
    const known = this.known?.dataVersion === dataVersion ? this.known : null;
    const head = known ? known.head : (this.headStmt.get() as number);
    return { dataVersion, known, head, versions: new Map(), recordedAt: new Date().toISOString() };
  }

  /**
   * The optimistic body of a group transaction: every append is decided first (expected version,
   * duplicate) without writing, then the rows of all that pass go in together, so a group of
   * single-event appends is one multi-row insert. If that insert throws (an id already stored), the
   * transaction aborts with `NEEDS_SAVEPOINTS` and the group is written again by `writeIsolated`.
   */
  private writeOptimistic(batch: PendingAppend[], writes: PendingWrite[]): GroupResult {
    const group = this.beginGroup();
    const toWrite: Planned[] = [];
    // Writes the decided appends' rows. Before a duplicate lookup too: an append may repeat the
    // ids of an earlier one in the same group, whose rows must then be in the table.
    const flush = (): void => {
      if (toWrite.length === 0) return;
      try {
        this.insert(toWrite, group.recordedAt);
      } catch (error) {
        if (isStorageFull(error)) throw error;
        throw NEEDS_SAVEPOINTS;
      }
      toWrite.length = 0;
    };
    const { head, outcomes } = this.appendEach(batch, group.head, (p, at) => {
      const decided = this.decide(group, p, flush);
      if (typeof decided !== 'number') return decided;
      toWrite.push({ p, head: at, current: decided });
      return this.written(group, p, at, decided);
    });
    flush();
    return this.finishGroup(group, head, outcomes, writes);
  }

  /** The body of a group transaction with each append in its own savepoint, so a failure rolls back only its rows. */
  private writeIsolated(batch: PendingAppend[], writes: PendingWrite[]): GroupResult {
    const group = this.beginGroup();
    const { head, outcomes } = this.appendEach(batch, group.head, (p, at) => this.appendTx(group, p, at));
    return this.finishGroup(group, head, outcomes, writes);
  }

  /**
   * Runs `one` for each append in order, after the head left by the ones before; an append that
   * throws gets its own failure (or its original result, for a retried one) and leaves the head.
   */
  private appendEach(
    batch: readonly PendingAppend[],
    head: number,
    one: (p: PendingAppend, head: number) => AppendResult,
  ): { head: number; outcomes: Outcome[] } {
    const outcomes: Outcome[] = [];
    for (const p of batch) {
      let result: AppendResult;
      try {
        result = one(p, head);
      } catch (error) {
        if (error === NEEDS_SAVEPOINTS || isStorageFull(error)) throw error;
        outcomes.push(this.resolveFailure(p, error));
        continue;
      }
      if (!result.duplicate) head = result.lastPosition;
      outcomes.push({ ok: true, result });
    }
    return { head, outcomes };
  }

  /** Runs the queued writes after the appends, each in its own savepoint. */
  private finishGroup(group: Group, head: number, outcomes: Outcome[], writes: PendingWrite[]): GroupResult {
    const writeOutcomes = writes.map((w): WriteOutcome => {
      try {
        return { ok: true, result: this.writeTx(w) };
      } catch (error) {
        if (isStorageFull(error)) throw error;
        return { ok: false, error: mapSqliteError(error) };
      }
    });
    return { head, outcomes, writeOutcomes, dataVersion: group.dataVersion, versions: group.versions };
  }

  /** One append in its own savepoint (`appendTx`): decided, then its rows written. */
  private appendOne(group: Group, p: PendingAppend, head: number): AppendResult {
    const decided = this.decide(group, p);
    if (typeof decided !== 'number') return decided;
    this.insert([{ p, head, current: decided }], group.recordedAt);
    return this.written(group, p, head, decided);
  }

  /**
   * Decides an append without writing: the stream's current version when its expected version
   * holds, or the original result of a duplicate; else throws `WrongExpectedVersionError`.
   * `beforeLookup` runs before the table is searched for its ids.
   */
  private decide(group: Group, p: PendingAppend, beforeLookup?: () => void): number | AppendResult {
    const current = this.currentVersion(group, p.stream);
    if (satisfies(p.expected, current)) return current;
    beforeLookup?.();
    const duplicate = this.findDuplicate(p);
    if (duplicate) return duplicate;
    throw new WrongExpectedVersionError(p.stream, p.expected, current);
  }

  /** The result of an append written after position `head` and version `current`; the group now knows its stream's new version. */
  private written(group: Group, p: PendingAppend, head: number, current: number): AppendResult {
    const n = p.events.length;
    const ids = new Array<string>(n);
    for (let i = 0; i < n; i++) ids[i] = p.events[i]!.id;
    group.versions.set(p.stream, current + n);
    return {
      stream: p.stream,
      version: current + n,
      firstPosition: head + 1,
      lastPosition: head + n,
      duplicate: false,
      ids,
    };
  }

  /** Inserts the rows of `appends`, in order, as one run of multi-row inserts. */
  private insert(appends: readonly Planned[], recordedAt: string): void {
    let total = 0;
    for (const a of appends) total += a.p.events.length;
    // Rows are filled in order: `a` is the append of row `index`, and `start` the index of its first row.
    let k = 0;
    let a = appends[0]!;
    let start = 0;
    let hash = streamHash(a.p.stream);
    this.insertRows.insert(total, (params, at, index) => {
      while (index - start >= a.p.events.length) {
        start += a.p.events.length;
        a = appends[++k]!;
        hash = streamHash(a.p.stream);
      }
      const i = index - start;
      const e = a.p.events[i]!;
      params[at] = a.head + i + 1;
      params[at + 1] = e.id;
      params[at + 2] = a.p.stream;
      params[at + 3] = a.current + i + 1;
      params[at + 4] = e.type;
      params[at + 5] = e.dataJson;
      params[at + 6] = e.metadataJson;
      params[at + 7] = recordedAt;
      params[at + 8] = hash;
    });
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
    for (const row of selectByIds(
      this.db,
      p.events.map((e) => e.id),
    ))
      existing.set(row.id, toExistingEvent(row));
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
    return new StorageFullError(
      `the database disk is full or failing (${code}); nothing of this append was written`,
      {
        cause: err,
      },
    );
  }
  if (code === 'SQLITE_BUSY') {
    return new IdemError(
      'unavailable',
      'the database file stayed locked by another process; nothing was written',
      {},
      {
        cause: err,
      },
    );
  }
  return err;
}
