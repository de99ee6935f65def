import type Database from 'better-sqlite3';
import { ClosedError } from '../core/errors.js';
import { isoTime } from '../core/isoTime.js';
import { redriveDelayMs } from '../core/parkInfo.js';
import type { RecordedEvent } from '../core/event.js';
import { filterKey, type EventFilter } from '../core/filter.js';
import type { ConsumerPause, DeadLetterStatus, FailureInfo, PauseReason } from '../core/subscription.js';
import {
  behindReason,
  type AckResult,
  type AcquireResult,
  type AdminResult,
  type BackendSelector,
  type ConsumerRecord,
  type DeadLetterRecord,
  type DeadLetterStreamQuery,
  type Fenced,
  type ForceReleaseResult,
  type NewPause,
  type ParkBehindResult,
  type ParkRequest,
  type ParkResult,
  type PauseResult,
  type RegisterResult,
  type RenewResult,
  type StoredConsumerStatus,
  type SubscriptionStateBackend,
  type WriteResult,
} from '../subscriptions/stateBackend.js';

interface ConsumerRow {
  name: string;
  filter: string;
  filter_key: string;
  position: number;
  owner: string | null;
  epoch: number;
  lease_expires_at: number | null;
  status: StoredConsumerStatus;
  last_error: string | null;
  failed_event: string | null;
  pause_reason: PauseReason | null;
  paused_at: string | null;
  paused_by: string | null;
  created_at: string;
  updated_at: string;
  parked: number;
}

type PauseColumns = Pick<ConsumerRow, 'pause_reason' | 'paused_at' | 'paused_by'>;

interface LetterRow {
  consumer: string;
  event_id: string;
  stream: string;
  position: number;
  event: string;
  reason: string;
  error: string | null;
  attempts: number;
  status: DeadLetterStatus;
  behind: string | null;
  redrives: number;
  redrive_at: number | null;
  parked_at: string;
  skipped_by: string | null;
  skipped_at: string | null;
}

const ACTIVE = `status IN ('parked', 'retrying')`;
const SELECT_CONSUMER = `SELECT c.*, (SELECT count(*) FROM idem_dead_letters d WHERE d.consumer = c.name AND d.${ACTIVE}) AS parked FROM idem_consumers c`;

/**
 * Consumer state in the store's SQLite file (tables from `subscriptionSchema.ts`). Each write runs in
 * an IMMEDIATE transaction, so processes sharing the file see each method as one atomic step.
 */
export class SqliteSubscriptionState implements SubscriptionStateBackend {
  /** Prepared statements by SQL text (preparing costs more than running most of these). */
  private readonly statements = new Map<string, Database.Statement>();

  /**
   * @param groupWrite runs a write inside the store's next group commit (see `AppendBatcher.enqueueWrite`),
   *   so that acks share the appends' transaction and fsync; without it acks commit on their own.
   */
  constructor(
    private readonly db: Database.Database,
    private readonly now: () => number = Date.now,
    private readonly groupWrite?: <T>(fn: () => T) => Promise<T>,
  ) {}

  register(name: string, filter: EventFilter, startPosition: number): Promise<RegisterResult> {
    return this.write(() => {
      const row = this.row(name);
      if (row) {
        if (row.filter_key !== filterKey(filter)) {
          return {
            ok: false,
            reason: 'identity_conflict',
            existingFilter: JSON.parse(row.filter) as EventFilter,
          };
        }
        return { ok: true, created: false, state: toState(row) };
      }
      const at = this.iso();
      this.sql(
        `INSERT INTO idem_consumers (name, filter, filter_key, position, epoch, status, created_at, updated_at)
           VALUES (?, ?, ?, ?, 0, 'stopped', ?, ?)`,
      ).run(name, JSON.stringify(filter), filterKey(filter), startPosition, at, at);
      return { ok: true, created: true, state: toState(this.row(name)!) };
    });
  }

  acquire(name: string, owner: string, ttlMs: number): Promise<AcquireResult> {
    return this.write(() => {
      const row = this.row(name);
      if (!row) return { ok: false, reason: 'not_found' };
      const now = this.now();
      if (row.owner !== null && row.lease_expires_at !== null && row.lease_expires_at > now) {
        return {
          ok: false,
          reason: 'busy',
          owner: row.owner,
          leaseExpiresAt: isoTime(row.lease_expires_at),
        };
      }
      const expires = now + ttlMs;
      this.sql(
        `UPDATE idem_consumers SET epoch = epoch + 1, owner = ?, lease_expires_at = ?, status = 'running',
             last_error = NULL, failed_event = NULL, updated_at = ? WHERE name = ?`,
      ).run(owner, expires, new Date(now).toISOString(), name);
      return {
        ok: true,
        epoch: row.epoch + 1,
        position: row.position,
        leaseExpiresAt: new Date(expires).toISOString(),
      };
    });
  }

  renew(name: string, epoch: number, ttlMs: number): Promise<RenewResult> {
    // Every owner renews every third of its lease: with many subscriptions, one commit (and fsync)
    // each would take the write lock from the appends; they join the appends' commit instead.
    return this.groupedWrite(() => {
      const expires = this.now() + ttlMs;
      const r = this.sql(
        `UPDATE idem_consumers SET lease_expires_at = ? WHERE name = ? AND epoch = ?
           RETURNING pause_reason, paused_at, paused_by`,
      ).get(expires, name, epoch) as PauseColumns | undefined;
      if (!r) return this.fenced(name);
      return { ok: true, leaseExpiresAt: new Date(expires).toISOString(), pause: toPause(r) };
    });
  }

  release(name: string, epoch: number, failure?: FailureInfo): Promise<WriteResult> {
    return this.write(() => {
      const r = this.sql(
        `UPDATE idem_consumers SET owner = NULL, lease_expires_at = NULL, status = ?, last_error = ?, failed_event = ?,
             updated_at = ? WHERE name = ? AND epoch = ?`,
      ).run(
        failure ? 'failed' : 'stopped',
        failure ? JSON.stringify(failure.error) : null,
        failure?.event ? JSON.stringify(failure.event) : null,
        this.iso(),
        name,
        epoch,
      );
      return r.changes === 0 ? this.fenced(name) : { ok: true };
    });
  }

  ack(name: string, epoch: number, position: number, resolveIds: readonly string[]): Promise<AckResult> {
    // Acks come once per delivered batch while events are appended: they join the appends' commit.
    return this.groupedWrite(() => {
      const row = this.sql(`SELECT epoch, position FROM idem_consumers WHERE name = ?`).get(name) as
        { epoch: number; position: number } | undefined;
      if (!row || row.epoch !== epoch) return this.fenced(name);
      if (position > row.position) {
        this.sql(`UPDATE idem_consumers SET position = ?, updated_at = ? WHERE name = ?`).run(
          position,
          this.iso(),
          name,
        );
      }
      let resolved = 0;
      if (resolveIds.length > 0) {
        const resolve = this.sql(
          `UPDATE idem_dead_letters SET status = 'resolved' WHERE consumer = ? AND event_id = ? AND status = 'retrying'`,
        );
        for (const id of resolveIds) resolved += resolve.run(name, id).changes;
      }
      return { ok: true, position: Math.max(position, row.position), resolved };
    });
  }

  park(name: string, epoch: number, request: ParkRequest): Promise<ParkResult> {
    return this.write((): ParkResult => {
      const row = this.row(name);
      if (!row || row.epoch !== epoch) return this.fenced(name);
      const { event } = request;
      const existing = this.letter(name, event.id);
      const first = this.firstActive(name, event);
      this.sql(
        `UPDATE idem_dead_letters SET status = 'parked', behind = coalesce(?, behind)
           WHERE consumer = ? AND stream = ? AND ${ACTIVE} AND position > ?`,
      ).run(first ? null : event.id, name, event.stream, event.position);
      const redrives = existing?.redrives ?? 0;
      const redriveAt =
        request.redrive && redrives < request.redrive.max
          ? this.now() + redriveDelayMs(request.redrive, redrives)
          : null;
      this.upsert(name, event, request, 'parked', first?.event_id ?? null, redriveAt);
      return { ok: true, record: toRecord(this.letter(name, event.id)!) };
    });
  }

  parkBehind(name: string, epoch: number, events: readonly RecordedEvent[]): Promise<ParkBehindResult> {
    return this.write((): ParkBehindResult => {
      const row = this.row(name);
      if (!row || row.epoch !== epoch) return this.fenced(name);
      const released = new Set<string>();
      const parked = events.map((event) => {
        if (released.has(event.stream)) return false;
        const existing = this.letter(name, event.id);
        if (existing && (existing.status === 'parked' || existing.status === 'retrying')) return true;
        const first = this.firstActive(name, event);
        if (!first) {
          released.add(event.stream);
          return false;
        }
        const retrying = this.sql(
          `SELECT 1 FROM idem_dead_letters WHERE consumer = ? AND stream = ? AND status = 'retrying' LIMIT 1`,
        ).get(name, event.stream);
        const request = {
          event,
          reason: behindReason(event.stream),
          error: null,
          attempts: 0,
          redrive: null,
        };
        this.upsert(name, event, request, retrying ? 'retrying' : 'parked', first.event_id);
        return true;
      });
      return { ok: true, parked };
    });
  }

  /** The earliest active row of `event`'s stream at a lower position than it (not its own). */
  private firstActive(name: string, event: RecordedEvent): { event_id: string } | undefined {
    return this.sql(
      `SELECT event_id FROM idem_dead_letters WHERE consumer = ? AND stream = ? AND ${ACTIVE} AND position < ? AND event_id <> ?
         ORDER BY position LIMIT 1`,
    ).get(name, event.stream, event.position, event.id) as { event_id: string } | undefined;
  }

  setPause(name: string, pause: NewPause | null, onlyFrom?: PauseReason | null): Promise<PauseResult> {
    return this.write((): PauseResult => {
      const row = this.row(name);
      if (!row) return { ok: false, reason: 'not_found' };
      const current = row.pause_reason;
      const applies = (onlyFrom === undefined || onlyFrom === current) && (pause?.reason ?? null) !== current;
      if (!applies) return { ok: true, changed: false, pause: toPause(row) };
      const at = this.iso();
      this.sql(
        `UPDATE idem_consumers SET pause_reason = ?, paused_at = ?, paused_by = ?, updated_at = ? WHERE name = ?`,
      ).run(pause?.reason ?? null, pause ? at : null, pause?.by ?? null, at, name);
      return { ok: true, changed: true, pause: pause && { reason: pause.reason, since: at, by: pause.by } };
    });
  }

  get(name: string): Promise<ConsumerRecord | null> {
    return this.read(() => {
      const row = this.row(name);
      return row ? toState(row) : null;
    });
  }

  list(): Promise<ConsumerRecord[]> {
    return this.read(() =>
      (this.sql(`${SELECT_CONSUMER} ORDER BY c.name`).all() as ConsumerRow[]).map(toState),
    );
  }

  reset(name: string, position: number): Promise<AdminResult> {
    return this.admin(name, () => {
      this.sql(`UPDATE idem_consumers SET position = ?, updated_at = ? WHERE name = ?`).run(
        position,
        this.iso(),
        name,
      );
    });
  }

  ledgerHorizon(name: string): Promise<number> {
    return this.read(
      () =>
        (this.sql(`SELECT position FROM idem_ledger_horizons WHERE consumer = ?`).pluck().get(name) as
          number | undefined) ?? 0,
    );
  }

  setLedgerHorizon(name: string, position: number): Promise<void> {
    return this.write(() => {
      this.sql(
        `INSERT INTO idem_ledger_horizons (consumer, position) VALUES (?, ?)
         ON CONFLICT (consumer) DO UPDATE SET position = excluded.position`,
      ).run(name, position);
    });
  }

  delete(name: string): Promise<AdminResult> {
    return this.admin(name, () => {
      this.sql(`DELETE FROM idem_ledger_horizons WHERE consumer = ?`).run(name);
      this.sql(`DELETE FROM idem_dead_letters WHERE consumer = ?`).run(name);
      this.sql(`DELETE FROM idem_consumers WHERE name = ?`).run(name);
    });
  }

  forceRelease(name: string): Promise<ForceReleaseResult> {
    return this.write((): ForceReleaseResult => {
      const r = this.sql(
        `UPDATE idem_consumers SET owner = NULL, lease_expires_at = NULL, epoch = epoch + (owner IS NOT NULL),
             status = CASE WHEN status = 'running' THEN 'stopped' ELSE status END,
             updated_at = CASE WHEN owner IS NOT NULL THEN ? ELSE updated_at END
           WHERE name = ?`,
      ).run(this.iso(), name);
      return r.changes === 0 ? { ok: false, reason: 'not_found' } : { ok: true };
    });
  }

  deadLetters(
    name: string,
    options: { all?: boolean; status?: DeadLetterStatus; stream?: string; limit?: number } = {},
  ): Promise<DeadLetterRecord[]> {
    return this.read(() => {
      const where = ['consumer = ?'];
      const params: (string | number)[] = [name];
      if (options.status) {
        where.push('status = ?');
        params.push(options.status);
      } else if (!options.all) where.push(ACTIVE);
      if (options.stream !== undefined) {
        where.push('stream = ?');
        params.push(options.stream);
      }
      const limit = options.limit === undefined ? '' : ` LIMIT ${Math.floor(options.limit)}`;
      const sql = `SELECT * FROM idem_dead_letters WHERE ${where.join(' AND ')} ORDER BY position${limit}`;
      return (this.sql(sql).all(...params) as LetterRow[]).map(toRecord);
    });
  }

  retryingConsumers(names: readonly string[]): Promise<string[]> {
    return this.read(() =>
      (
        this.sql(
          `SELECT DISTINCT consumer FROM idem_dead_letters
            WHERE consumer IN (SELECT value FROM json_each(?)) AND status = 'retrying'`,
        ).all(JSON.stringify(names)) as { consumer: string }[]
      ).map((r) => r.consumer),
    );
  }

  blockedStreams(name: string): Promise<string[]> {
    return this.read(() =>
      (
        this.sql(`SELECT DISTINCT stream FROM idem_dead_letters WHERE consumer = ? AND ${ACTIVE}`).all(
          name,
        ) as { stream: string }[]
      ).map((r) => r.stream),
    );
  }

  deadLetterStreams(name: string, query: DeadLetterStreamQuery): Promise<string[]> {
    return this.read(() => {
      const status = query.statuses === 'parked' ? `status = 'parked'` : ACTIVE;
      const match =
        query.error === undefined
          ? ''
          : ` AND (json_extract(error, '$.code') = @error OR json_extract(error, '$.name') = @error
                   OR instr(json_extract(error, '$.message'), @error) > 0)`;
      const rows = this.sql(
        `SELECT DISTINCT stream FROM idem_dead_letters
          WHERE consumer = @name AND ${status} AND (@after IS NULL OR stream > @after)${match}
          ORDER BY stream LIMIT @limit`,
      ).all({
        name,
        after: query.after,
        limit: query.limit,
        ...(query.error === undefined ? {} : { error: query.error }),
      }) as { stream: string }[];
      return rows.map((r) => r.stream);
    });
  }

  retry(name: string, selector: BackendSelector): Promise<number> {
    return this.write(() => {
      const streams = this.selectedStreams(name, selector);
      if (streams.length === 0) return 0;
      return this.sql(
        `UPDATE idem_dead_letters SET status = 'retrying'
          WHERE consumer = ? AND stream IN (SELECT value FROM json_each(?)) AND status = 'parked'`,
      ).run(name, JSON.stringify(streams)).changes;
    });
  }

  skip(name: string, selector: BackendSelector, by: string): Promise<number> {
    return this.write(() => {
      const streams = this.selectedStreams(name, selector);
      if (streams.length === 0) return 0;
      return this.sql(
        `UPDATE idem_dead_letters SET status = 'skipped', skipped_by = ?, skipped_at = ?
          WHERE consumer = ? AND stream IN (SELECT value FROM json_each(?)) AND ${ACTIVE}`,
      ).run(by, this.iso(), name, JSON.stringify(streams)).changes;
    });
  }

  redriveDue(name: string): Promise<number> {
    return this.write(() => {
      const now = this.now();
      return this.sql(
        `UPDATE idem_dead_letters
            SET status = 'retrying',
                redrives = redrives + (redrive_at IS NOT NULL AND redrive_at <= @now),
                redrive_at = CASE WHEN redrive_at <= @now THEN NULL ELSE redrive_at END
          WHERE consumer = @name AND status = 'parked' AND stream IN (
            SELECT stream FROM idem_dead_letters
             WHERE consumer = @name AND redrive_at <= @now AND status = 'parked')`,
      ).run({ name, now }).changes;
    });
  }

  private selectedStreams(name: string, selector: BackendSelector): readonly string[] {
    if ('streams' in selector) return selector.streams;
    if ('stream' in selector) return [selector.stream];
    const stream = this.letter(name, selector.id)?.stream;
    return stream === undefined ? [] : [stream];
  }

  private upsert(
    name: string,
    event: RecordedEvent,
    request: ParkRequest,
    status: DeadLetterStatus,
    behind: string | null,
    redriveAt: number | null = null,
  ): void {
    this.db
      .prepare(
        `INSERT INTO idem_dead_letters (consumer, event_id, stream, position, event, reason, error, attempts, status, behind, parked_at, redrive_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (consumer, event_id) DO UPDATE SET reason = excluded.reason, error = excluded.error,
           attempts = excluded.attempts, status = excluded.status, behind = excluded.behind,
           redrive_at = excluded.redrive_at, skipped_by = NULL, skipped_at = NULL`,
      )
      .run(
        name,
        event.id,
        event.stream,
        event.position,
        JSON.stringify(event),
        request.reason,
        request.error ? JSON.stringify(request.error) : null,
        request.attempts,
        status,
        behind,
        this.iso(),
        redriveAt,
      );
  }

  private admin(name: string, change: () => void): Promise<AdminResult> {
    return this.write((): AdminResult => {
      const row = this.row(name);
      if (!row) return { ok: false, reason: 'not_found' };
      if (row.owner !== null && row.lease_expires_at !== null && row.lease_expires_at > this.now()) {
        return {
          ok: false,
          reason: 'busy',
          owner: row.owner,
          leaseExpiresAt: isoTime(row.lease_expires_at),
        };
      }
      change();
      return { ok: true };
    });
  }

  private fenced(name: string): Fenced {
    const row = this.sql(`SELECT epoch FROM idem_consumers WHERE name = ?`).get(name) as
      { epoch: number } | undefined;
    return { ok: false, reason: 'fenced', currentEpoch: row?.epoch ?? null };
  }

  private row(name: string): ConsumerRow | undefined {
    return this.sql(`${SELECT_CONSUMER} WHERE c.name = ?`).get(name) as ConsumerRow | undefined;
  }

  private letter(name: string, id: string): LetterRow | undefined {
    return this.sql(`SELECT * FROM idem_dead_letters WHERE consumer = ? AND event_id = ?`).get(name, id) as
      LetterRow | undefined;
  }

  private sql(text: string): Database.Statement {
    let stmt = this.statements.get(text);
    if (!stmt) {
      // A few dozen texts in practice (LIMIT values vary); the bound keeps the map small anyway.
      if (this.statements.size >= 200) this.statements.clear();
      stmt = this.db.prepare(text);
      this.statements.set(text, stmt);
    }
    return stmt;
  }

  private iso(): string {
    return new Date(this.now()).toISOString();
  }

  private write<T>(fn: () => T): Promise<T> {
    return this.read(() => this.db.transaction(fn).immediate());
  }

  /** Like `write`, in the store's next group commit when there is one; durable alike once it resolves. */
  private groupedWrite<T>(fn: () => T): Promise<T> {
    if (!this.groupWrite) return this.write(fn);
    if (!this.db.open) return Promise.reject(new ClosedError('SQLite store'));
    return this.groupWrite(fn);
  }

  private read<T>(fn: () => T): Promise<T> {
    if (!this.db.open) return Promise.reject(new ClosedError('SQLite store'));
    try {
      return Promise.resolve(fn());
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }
}

function toState(row: ConsumerRow): ConsumerRecord {
  return {
    name: row.name,
    filter: JSON.parse(row.filter) as EventFilter,
    position: row.position,
    owner: row.owner,
    epoch: row.epoch,
    leaseExpiresAt: row.lease_expires_at === null ? null : isoTime(row.lease_expires_at),
    status: row.status,
    lastError: row.last_error === null ? null : (JSON.parse(row.last_error) as ConsumerRecord['lastError']),
    failedEvent:
      row.failed_event === null ? null : (JSON.parse(row.failed_event) as ConsumerRecord['failedEvent']),
    parked: row.parked,
    pause: toPause(row),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function toPause(row: PauseColumns): ConsumerPause | null {
  if (row.pause_reason === null) return null;
  return { reason: row.pause_reason, since: row.paused_at ?? '', by: row.paused_by };
}

function toRecord(row: LetterRow): DeadLetterRecord {
  return {
    consumer: row.consumer,
    event: JSON.parse(row.event) as RecordedEvent,
    reason: row.reason,
    error: row.error === null ? null : (JSON.parse(row.error) as DeadLetterRecord['error']),
    attempts: row.attempts,
    status: row.status,
    behind: row.behind,
    redrives: row.redrives,
    redriveAt: row.redrive_at === null ? null : isoTime(row.redrive_at),
    parkedAt: row.parked_at,
    skippedBy: row.skipped_by,
    skippedAt: row.skipped_at,
  };
}
