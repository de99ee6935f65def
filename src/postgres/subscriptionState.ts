import { checkout } from './checkout.js';
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { RecordedEvent } from '../core/event.js';
import { isoTime } from '../core/isoTime.js';
import { redriveDelayMs } from '../core/parkInfo.js';
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
import { withReconnect, type RetryOptions } from './connectionFaults.js';
import { statementName } from './schemaName.js';

interface ConsumerRow {
  name: string;
  filter: EventFilter;
  filter_key: string;
  position: string;
  owner: string | null;
  epoch: string;
  lease_expires_at: Date | null;
  lease_token: string | null;
  status: StoredConsumerStatus;
  last_error: ConsumerRecord['lastError'];
  failed_event: ConsumerRecord['failedEvent'];
  pause_reason: PauseReason | null;
  paused_at: Date | null;
  paused_by: string | null;
  created_at: Date;
  updated_at: Date;
  parked: string;
}

type PauseColumns = Pick<ConsumerRow, 'pause_reason' | 'paused_at' | 'paused_by'>;

interface LetterRow {
  consumer: string;
  event_id: string;
  event: RecordedEvent;
  reason: string;
  error: DeadLetterRecord['error'];
  attempts: number;
  status: DeadLetterStatus;
  behind: string | null;
  redrives: number;
  redrive_at: Date | null;
  parked_at: Date;
  skipped_by: string | null;
  skipped_at: Date | null;
}

/**
 * Epoch-carrying writes of a process's subscriptions made at the same time (acks, lease renewals),
 * stored by one statement: for each consumer and epoch the highest `value` is written, and each write
 * gets its row's result, or `fenced` when its epoch is not the stored one (no row). One statement runs
 * at a time; the writes made meanwhile go together in the next, scheduled by `defer`.
 */
class GroupedWrites<Row extends { name: string; epoch: string }, R> {
  private queue: {
    name: string;
    epoch: number;
    value: number;
    resolve: (r: R) => void;
    reject: (e: unknown) => void;
  }[] = [];
  private running = false;
  private due = false;

  constructor(
    private readonly defer: (run: () => void) => void,
    /** The statement: the writes' consumer names, epochs and values; the rows it wrote. */
    private readonly write: (names: string[], epochs: number[], values: number[]) => Promise<Row[]>,
    private readonly result: (row: Row) => R,
    private readonly fenced: (name: string) => Promise<R>,
  ) {}

  add(name: string, epoch: number, value: number): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ name, epoch, value, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.due || this.running) return;
    this.due = true;
    this.defer(() => {
      this.due = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (this.running || this.queue.length === 0) return;
    this.running = true;
    const batch = this.queue;
    this.queue = [];
    try {
      const highest = new Map<string, (typeof batch)[number]>();
      for (const w of batch) {
        const key = `${w.epoch} ${w.name}`;
        const seen = highest.get(key);
        if (!seen || w.value > seen.value) highest.set(key, w);
      }
      const entries = [...highest.values()];
      const rows = await this.write(
        entries.map((w) => w.name),
        entries.map((w) => w.epoch),
        entries.map((w) => w.value),
      );
      const written = new Map(rows.map((row) => [`${row.epoch} ${row.name}`, row]));
      for (const w of batch) {
        const row = written.get(`${w.epoch} ${w.name}`);
        if (row === undefined) this.fenced(w.name).then(w.resolve, w.reject);
        else w.resolve(this.result(row));
      }
    } catch (err) {
      for (const w of batch) w.reject(err);
    } finally {
      this.running = false;
      if (this.queue.length > 0) this.schedule();
    }
  }
}

const ACTIVE = `status IN ('parked', 'retrying')`;
const LIVE = `(owner IS NOT NULL AND coalesce(lease_expires_at > now(), false))`;
const TTL = (param: string): string => `now() + ${param}::bigint * interval '1 millisecond'`;

/**
 * Consumer state in PostgreSQL (tables from `subscriptionSchema.ts`), shared by every process using
 * the schema. Each method is one statement, or one short transaction that locks the consumer's row
 * first, so lease takeover is a compare-and-set: of two processes acquiring at once, exactly one
 * gets the next epoch, and every epoch-carrying write checks the epoch in the same statement.
 * Statements are retried on a new connection after a connection fault; each is safe to repeat.
 */
export class PostgresSubscriptionState implements SubscriptionStateBackend {
  private readonly c: string;
  private readonly d: string;
  private readonly h: string;

  /**
   * Acks that resolve no dead letter, grouped per microtask: the acks of one polling tick (many idle
   * subscriptions moving their cursors past the events their filters leave out) are one statement.
   */
  private readonly acks = new GroupedWrites<{ name: string; epoch: string; position: string }, AckResult>(
    queueMicrotask,
    (names, epochs, positions) =>
      this.query(
        this.named(
          'ack',
          `WITH v AS (
           SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS v(name, epoch, position))
         UPDATE ${this.c} t SET position = greatest(t.position, v.position),
           updated_at = CASE WHEN v.position > t.position THEN now() ELSE t.updated_at END
         FROM v WHERE t.name = v.name AND t.epoch = v.epoch
         RETURNING t.name, t.epoch, t.position`,
        ),
        [names, epochs, positions],
      ),
    (row) => ({ ok: true, position: Number(row.position), resolved: 0 }),
    (name) => this.fenced(name),
  );
  /**
   * Lease renewals grouped per turn of the event loop (`setImmediate`, after the timers): the
   * heartbeats of a process's subscriptions tick together (`AlignedInterval`), so their renewals are
   * one statement instead of one write transaction each. The value is the lease's TTL.
   */
  private readonly renewals = new GroupedWrites<
    { name: string; epoch: string; lease_expires_at: Date } & PauseColumns,
    RenewResult
  >(
    setImmediate,
    (names, epochs, ttls) =>
      this.query(
        this.named(
          'renew',
          `WITH v AS (
           SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS v(name, epoch, ttl))
         UPDATE ${this.c} t SET lease_expires_at = ${TTL('v.ttl')}
         FROM v WHERE t.name = v.name AND t.epoch = v.epoch
         RETURNING t.name, t.epoch, t.lease_expires_at, t.pause_reason, t.paused_at, t.paused_by`,
        ),
        [names, epochs, ttls],
      ),
    (row) => ({ ok: true, leaseExpiresAt: isoTime(row.lease_expires_at), pause: toPause(row) }),
    (name) => this.fenced(name),
  );

  constructor(
    private readonly pool: Pool,
    /** The quoted schema. */
    private readonly s: string,
    private readonly retryOptions: RetryOptions = {},
    /** Send the grouped acks and renewals as named statements, prepared once per connection. */
    private readonly prepared = true,
  ) {
    this.c = `${s}.consumers`;
    this.d = `${s}.dead_letters`;
    this.h = `${s}.ledger_horizons`;
  }

  async register(name: string, filter: EventFilter, startPosition: number): Promise<RegisterResult> {
    const key = filterKey(filter);
    const inserted = await this.query(
      `INSERT INTO ${this.c} (name, filter, filter_key, position, epoch, status) VALUES ($1, $2, $3, $4, 0, 'stopped')
       ON CONFLICT (name) DO NOTHING RETURNING name`,
      [name, JSON.stringify(filter), key, startPosition],
    );
    const row = await this.row(name);
    if (!row) return this.register(name, filter, startPosition); // deleted meanwhile
    if (row.filter_key !== key) return { ok: false, reason: 'identity_conflict', existingFilter: row.filter };
    return { ok: true, created: inserted.length > 0, state: toState(row) };
  }

  async acquire(name: string, owner: string, ttlMs: number): Promise<AcquireResult> {
    const token = randomUUID();
    return withReconnect(async (): Promise<AcquireResult> => {
      const r = await this.pool.query<{ epoch: string; position: string; lease_expires_at: Date }>(
        `UPDATE ${this.c} SET epoch = epoch + 1, owner = $2, lease_expires_at = ${TTL('$3')}, lease_token = $4,
           status = 'running', last_error = NULL, failed_event = NULL, updated_at = now()
         WHERE name = $1 AND NOT ${LIVE}
         RETURNING epoch, position, lease_expires_at`,
        [name, owner, ttlMs, token],
      );
      const won = r.rows[0] ?? (await this.ownLease(name, token));
      if (won) {
        return {
          ok: true,
          epoch: Number(won.epoch),
          position: Number(won.position),
          leaseExpiresAt: isoTime(won.lease_expires_at),
        };
      }
      const row = await this.row(name);
      if (!row) return { ok: false, reason: 'not_found' };
      return { ok: false, reason: 'busy', owner: row.owner, leaseExpiresAt: iso(row.lease_expires_at) };
    }, this.retryOptions);
  }

  /** Renews the lease, in one statement with the renewals made in the same turn (see `renewals`). */
  renew(name: string, epoch: number, ttlMs: number): Promise<RenewResult> {
    return this.renewals.add(name, epoch, ttlMs);
  }

  async release(name: string, epoch: number, failure?: FailureInfo): Promise<WriteResult> {
    const rows = await this.query(
      `UPDATE ${this.c} SET owner = NULL, lease_expires_at = NULL, lease_token = NULL, status = $3,
         last_error = $4, failed_event = $5, updated_at = now()
       WHERE name = $1 AND epoch = $2 RETURNING name`,
      [
        name,
        epoch,
        failure ? 'failed' : 'stopped',
        failure ? JSON.stringify(failure.error) : null,
        failure?.event ? JSON.stringify(failure.event) : null,
      ],
    );
    return rows.length > 0 ? { ok: true } : this.fenced(name);
  }

  /** An ack that resolves no dead letter (nearly all of them) joins the others made at the same time (see `acks`). */
  ack(name: string, epoch: number, position: number, resolveIds: readonly string[]): Promise<AckResult> {
    if (resolveIds.length > 0) return this.ackResolving(name, epoch, position, resolveIds);
    return this.acks.add(name, epoch, position);
  }

  private async ackResolving(
    name: string,
    epoch: number,
    position: number,
    resolveIds: readonly string[],
  ): Promise<AckResult> {
    const rows = await this.query<{ position: string | null; resolved: string }>(
      `WITH c AS (
         UPDATE ${this.c} SET position = greatest(position, $3),
           updated_at = CASE WHEN $3 > position THEN now() ELSE updated_at END
         WHERE name = $1 AND epoch = $2 RETURNING position),
       r AS (
         UPDATE ${this.d} SET status = 'resolved'
         WHERE consumer = $1 AND event_id = ANY($4::text[]) AND status = 'retrying' AND EXISTS (SELECT 1 FROM c)
         RETURNING 1)
       SELECT (SELECT position FROM c) AS position, (SELECT count(*) FROM r) AS resolved`,
      [name, epoch, position, [...resolveIds]],
    );
    const row = rows[0];
    if (!row || row.position === null) return this.fenced(name);
    return { ok: true, position: Number(row.position), resolved: Number(row.resolved) };
  }

  park(name: string, epoch: number, request: ParkRequest): Promise<ParkResult> {
    return this.tx(async (q): Promise<ParkResult> => {
      const owner = await q<{ epoch: string }>(`SELECT epoch FROM ${this.c} WHERE name = $1 FOR UPDATE`, [
        name,
      ]);
      if (!owner[0] || Number(owner[0].epoch) !== epoch) return this.fenced(name);
      const { event } = request;
      const existing = (
        await q<LetterRow>(`SELECT * FROM ${this.d} WHERE consumer = $1 AND event_id = $2`, [name, event.id])
      )[0];
      const first = (
        await q<{ event_id: string }>(
          `SELECT event_id FROM ${this.d} WHERE consumer = $1 AND stream = $2 AND ${ACTIVE} AND position < $3 AND event_id <> $4
           ORDER BY position LIMIT 1`,
          [name, event.stream, event.position, event.id],
        )
      )[0];
      // Later active rows of the stream go (back) to parked, and wait behind this event when it heads the stream.
      await q(
        `UPDATE ${this.d} SET status = 'parked', behind = coalesce($4::text, behind)
         WHERE consumer = $1 AND stream = $2 AND ${ACTIVE} AND position > $3`,
        [name, event.stream, event.position, first ? null : event.id],
      );
      const redrives = existing?.redrives ?? 0;
      const redriveMs =
        request.redrive && redrives < request.redrive.max ? redriveDelayMs(request.redrive, redrives) : null;
      const rows = await q<LetterRow>(
        `INSERT INTO ${this.d} (consumer, event_id, stream, position, event, reason, error, attempts, status, behind, redrive_at)
         VALUES ($1, $2, $3, $4, $5::json, $6, $7::jsonb, $8, $9, $10,
                 now() + $11::double precision * interval '1 millisecond')
         ON CONFLICT (consumer, event_id) DO UPDATE SET reason = excluded.reason, error = excluded.error,
           attempts = excluded.attempts, status = excluded.status, behind = excluded.behind,
           redrive_at = excluded.redrive_at, skipped_by = NULL, skipped_at = NULL
         RETURNING *`,
        [
          name,
          event.id,
          event.stream,
          event.position,
          JSON.stringify(event),
          request.reason,
          request.error ? JSON.stringify(request.error) : null,
          request.attempts,
          'parked',
          first?.event_id ?? null,
          redriveMs,
        ],
      );
      return { ok: true, record: toRecord(rows[0]!) };
    });
  }

  /**
   * Five statements for any number of events: the owner's lock, the events' own active rows, each
   * stream's earliest active row (and whether one is retrying), one INSERT of the rows to park.
   */
  parkBehind(name: string, epoch: number, events: readonly RecordedEvent[]): Promise<ParkBehindResult> {
    return this.tx(async (q): Promise<ParkBehindResult> => {
      const owner = await q<{ epoch: string }>(`SELECT epoch FROM ${this.c} WHERE name = $1 FOR UPDATE`, [
        name,
      ]);
      if (!owner[0] || Number(owner[0].epoch) !== epoch) return this.fenced(name);
      const active = new Set(
        (
          await q<{ event_id: string }>(
            `SELECT event_id FROM ${this.d} WHERE consumer = $1 AND event_id = ANY($2::text[]) AND ${ACTIVE}`,
            [name, events.map((e) => e.id)],
          )
        ).map((r) => r.event_id),
      );
      const heads = new Map(
        (
          await q<{ stream: string; event_id: string; position: string; retrying: boolean }>(
            `SELECT DISTINCT ON (stream) stream, event_id, position,
                    bool_or(status = 'retrying') OVER (PARTITION BY stream) AS retrying
               FROM ${this.d} WHERE consumer = $1 AND stream = ANY($2::text[]) AND ${ACTIVE}
              ORDER BY stream, position`,
            [name, [...new Set(events.map((e) => e.stream))]],
          )
        ).map((r) => [r.stream, r]),
      );
      const released = new Set<string>();
      const rows: { event: RecordedEvent; status: DeadLetterStatus; behind: string }[] = [];
      const parked = events.map((event) => {
        if (released.has(event.stream)) return false;
        if (active.has(event.id)) return true;
        const head = heads.get(event.stream);
        if (!head || Number(head.position) >= event.position) {
          released.add(event.stream);
          return false;
        }
        rows.push({ event, status: head.retrying ? 'retrying' : 'parked', behind: head.event_id });
        return true;
      });
      if (rows.length > 0)
        await q(
          `INSERT INTO ${this.d} (consumer, event_id, stream, position, event, reason, error, attempts, status, behind, redrive_at)
           SELECT $1, r.event_id, r.stream, r.position, r.event::json, r.reason, NULL, 0, r.status, r.behind, NULL
             FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[])
                  AS r(event_id, stream, position, event, reason, status, behind)
           ON CONFLICT (consumer, event_id) DO UPDATE SET reason = excluded.reason, error = excluded.error,
             attempts = excluded.attempts, status = excluded.status, behind = excluded.behind,
             redrive_at = excluded.redrive_at, skipped_by = NULL, skipped_at = NULL`,
          [
            name,
            rows.map((r) => r.event.id),
            rows.map((r) => r.event.stream),
            rows.map((r) => r.event.position),
            rows.map((r) => JSON.stringify(r.event)),
            rows.map((r) => behindReason(r.event.stream)),
            rows.map((r) => r.status),
            rows.map((r) => r.behind),
          ],
        );
      return { ok: true, parked };
    });
  }

  async setPause(name: string, pause: NewPause | null, onlyFrom?: PauseReason | null): Promise<PauseResult> {
    // One statement: the row as it was (FOR UPDATE), and the update when it applies. Repeating it
    // after a connection fault finds the change made and reports it unchanged.
    const rows = await this.query<PauseColumns & { changed: boolean }>(
      `WITH old AS (SELECT name, pause_reason FROM ${this.c} WHERE name = $1 FOR UPDATE),
       upd AS (
         UPDATE ${this.c} c SET pause_reason = $2, paused_at = CASE WHEN $2::text IS NULL THEN NULL ELSE now() END,
           paused_by = $3, updated_at = now()
         FROM old WHERE c.name = old.name
           AND old.pause_reason IS DISTINCT FROM $2::text
           AND ($4::boolean OR old.pause_reason IS NOT DISTINCT FROM $5::text)
         RETURNING c.pause_reason, c.paused_at, c.paused_by)
       SELECT p.pause_reason, p.paused_at, p.paused_by, p.changed FROM (
         SELECT pause_reason, paused_at, paused_by, true AS changed FROM upd
         UNION ALL
         SELECT c.pause_reason, c.paused_at, c.paused_by, false FROM ${this.c} c
           WHERE c.name = $1 AND NOT EXISTS (SELECT 1 FROM upd)) p`,
      [name, pause?.reason ?? null, pause?.by ?? null, onlyFrom === undefined, onlyFrom ?? null],
    );
    const row = rows[0];
    if (!row) return { ok: false, reason: 'not_found' };
    return { ok: true, changed: row.changed, pause: toPause(row) };
  }

  async get(name: string): Promise<ConsumerRecord | null> {
    const row = await this.row(name);
    return row ? toState(row) : null;
  }

  async list(): Promise<ConsumerRecord[]> {
    return (await this.query<ConsumerRow>(`${this.selectConsumer()} ORDER BY c.name`)).map(toState);
  }

  reset(name: string, position: number): Promise<AdminResult> {
    return this.admin(name, (q) =>
      q(`UPDATE ${this.c} SET position = $2, updated_at = now() WHERE name = $1`, [name, position]),
    );
  }

  async ledgerHorizon(name: string): Promise<number> {
    const rows = await this.query<{ position: string }>(
      `SELECT position FROM ${this.h} WHERE consumer = $1`,
      [name],
    );
    return rows[0] ? Number(rows[0].position) : 0;
  }

  async setLedgerHorizon(name: string, position: number): Promise<void> {
    await this.query(
      `INSERT INTO ${this.h} (consumer, position) VALUES ($1, $2)
       ON CONFLICT (consumer) DO UPDATE SET position = excluded.position`,
      [name, position],
    );
  }

  async delete(name: string): Promise<AdminResult> {
    let faulted = false;
    const result = await withReconnect(
      () =>
        this.admin(name, async (q) => {
          await q(`DELETE FROM ${this.h} WHERE consumer = $1`, [name]);
          await q(`DELETE FROM ${this.d} WHERE consumer = $1`, [name]);
          await q(`DELETE FROM ${this.c} WHERE name = $1`, [name]);
        }),
      this.retryOptions,
      () => {
        faulted = true;
      },
    );
    // After a fault the first try may have deleted it: `not_found` then means done.
    return faulted && !result.ok && result.reason === 'not_found' ? { ok: true } : result;
  }

  async forceRelease(name: string): Promise<ForceReleaseResult> {
    // Without an owner the row is only matched (`epoch + 0`), so a repeat after a fault is harmless.
    const rows = await this.query(
      `UPDATE ${this.c} SET epoch = epoch + (owner IS NOT NULL)::int, owner = NULL, lease_expires_at = NULL,
         lease_token = NULL, status = CASE WHEN status = 'running' THEN 'stopped' ELSE status END,
         updated_at = CASE WHEN owner IS NOT NULL THEN now() ELSE updated_at END
       WHERE name = $1 RETURNING name`,
      [name],
    );
    return rows.length === 0 ? { ok: false, reason: 'not_found' } : { ok: true };
  }

  async deadLetters(
    name: string,
    options: { all?: boolean; status?: DeadLetterStatus; stream?: string; limit?: number } = {},
  ): Promise<DeadLetterRecord[]> {
    const where = ['consumer = $1'];
    const params: unknown[] = [name];
    if (options.status) {
      params.push(options.status);
      where.push(`status = $${params.length}`);
    } else if (!options.all) where.push(ACTIVE);
    if (options.stream !== undefined) {
      params.push(options.stream);
      where.push(`stream = $${params.length}`);
    }
    const limit = options.limit === undefined ? '' : ` LIMIT ${Math.floor(options.limit)}`;
    const rows = await this.query<LetterRow>(
      `SELECT * FROM ${this.d} WHERE ${where.join(' AND ')} ORDER BY position${limit}`,
      params,
    );
    return rows.map(toRecord);
  }

  async retryingConsumers(names: readonly string[]): Promise<string[]> {
    const rows = await this.query<{ consumer: string }>(
      `SELECT DISTINCT consumer FROM ${this.d} WHERE consumer = ANY($1::text[]) AND status = 'retrying'`,
      [names],
    );
    return rows.map((r) => r.consumer);
  }

  async blockedStreams(name: string): Promise<string[]> {
    const rows = await this.query<{ stream: string }>(
      `SELECT DISTINCT stream FROM ${this.d} WHERE consumer = $1 AND ${ACTIVE}`,
      [name],
    );
    return rows.map((r) => r.stream);
  }

  async deadLetterStreams(name: string, query: DeadLetterStreamQuery): Promise<string[]> {
    const status = query.statuses === 'parked' ? `status = 'parked'` : ACTIVE;
    const match =
      query.error === undefined
        ? ''
        : ` AND (error->>'code' = $4 OR error->>'name' = $4 OR strpos(error->>'message', $4) > 0)`;
    const rows = await this.query<{ stream: string }>(
      `SELECT DISTINCT stream COLLATE "C" AS stream FROM ${this.d}
        WHERE consumer = $1 AND ${status} AND ($2::text IS NULL OR stream COLLATE "C" > $2::text)${match}
        ORDER BY 1 LIMIT $3`,
      query.error === undefined
        ? [name, query.after, query.limit]
        : [name, query.after, query.limit, query.error],
    );
    return rows.map((r) => r.stream);
  }

  async retry(name: string, selector: BackendSelector): Promise<number> {
    const rows = await this.withParksHeld(name, (q) =>
      q(
        `UPDATE ${this.d} SET status = 'retrying' WHERE consumer = $1 AND stream = ANY(${this.selectedStreams()}) AND status = 'parked' RETURNING 1`,
        [name, ...selectorParams(selector)],
      ),
    );
    return rows.length;
  }

  async skip(name: string, selector: BackendSelector, by: string): Promise<number> {
    const rows = await this.withParksHeld(name, (q) =>
      q(
        `UPDATE ${this.d} SET status = 'skipped', skipped_by = $4, skipped_at = now()
         WHERE consumer = $1 AND stream = ANY(${this.selectedStreams()}) AND ${ACTIVE} RETURNING 1`,
        [name, ...selectorParams(selector), by],
      ),
    );
    return rows.length;
  }

  /**
   * Runs `fn` in a transaction holding the consumer's row, as `park` and `parkBehind` do: a park reads
   * the stream's dead letters and then writes rows behind them, so a retry or skip committed between
   * the two would leave those rows `parked` behind a letter no longer active, the stream blocked.
   * Serialised, a retry either sees the new rows or is seen by the park (which then writes `retrying`).
   */
  private withParksHeld<T>(name: string, fn: (q: Query) => Promise<T>): Promise<T> {
    return this.tx(async (q) => {
      await q(`SELECT 1 FROM ${this.c} WHERE name = $1 FOR UPDATE`, [name]);
      return fn(q);
    });
  }

  async redriveDue(name: string): Promise<number> {
    // The due streams are looked up once (an ARRAY sub-select runs as an init plan). Written as
    // `stream IN (SELECT ...)`, a planner without statistics for a table that has just grown (a
    // catch-up parking thousands of events) joins each parked row to a scan of all of them.
    const rows = await this.withParksHeld(name, (q) =>
      q(
        `UPDATE ${this.d}
          SET status = 'retrying',
              redrives = redrives + (redrive_at IS NOT NULL AND redrive_at <= now())::int,
              redrive_at = CASE WHEN redrive_at <= now() THEN NULL ELSE redrive_at END
        WHERE consumer = $1 AND status = 'parked' AND stream = ANY(ARRAY(
          SELECT DISTINCT stream FROM ${this.d}
           WHERE consumer = $1 AND redrive_at IS NOT NULL AND redrive_at <= now() AND status = 'parked'))
        RETURNING 1`,
        [name],
      ),
    );
    return rows.length;
  }

  /** The selected streams: `$2`, or the stream of the row of event `$3`. */
  private selectedStreams(): string {
    return `coalesce($2::text[], ARRAY(SELECT l.stream FROM ${this.d} l WHERE l.consumer = $1 AND l.event_id = $3::text))`;
  }

  private ownLease(
    name: string,
    token: string,
  ): Promise<{ epoch: string; position: string; lease_expires_at: Date } | undefined> {
    return this.pool
      .query<{ epoch: string; position: string; lease_expires_at: Date }>(
        `SELECT epoch, position, lease_expires_at FROM ${this.c} WHERE name = $1 AND lease_token = $2 AND ${LIVE}`,
        [name, token],
      )
      .then((r) => r.rows[0]);
  }

  private admin(name: string, change: (q: Query) => Promise<unknown>): Promise<AdminResult> {
    return this.tx(async (q): Promise<AdminResult> => {
      const rows = await q<{ owner: string | null; lease_expires_at: Date | null; live: boolean }>(
        `SELECT owner, lease_expires_at, ${LIVE} AS live FROM ${this.c} WHERE name = $1 FOR UPDATE`,
        [name],
      );
      const row = rows[0];
      if (!row) return { ok: false, reason: 'not_found' };
      if (row.live)
        return { ok: false, reason: 'busy', owner: row.owner, leaseExpiresAt: iso(row.lease_expires_at) };
      await change(q);
      return { ok: true };
    });
  }

  private async fenced(name: string): Promise<Fenced> {
    const rows = await this.query<{ epoch: string }>(`SELECT epoch FROM ${this.c} WHERE name = $1`, [name]);
    return { ok: false, reason: 'fenced', currentEpoch: rows[0] ? Number(rows[0].epoch) : null };
  }

  private selectConsumer(): string {
    return `SELECT c.*, (SELECT count(*) FROM ${this.d} d WHERE d.consumer = c.name AND d.${ACTIVE}) AS parked FROM ${this.c} c`;
  }

  private async row(name: string): Promise<ConsumerRow | undefined> {
    return (await this.query<ConsumerRow>(`${this.selectConsumer()} WHERE c.name = $1`, [name]))[0];
  }

  private async query<R extends object = Record<string, unknown>>(
    sql: string | { name?: string; text: string },
    params: unknown[] = [],
  ): Promise<R[]> {
    const config = typeof sql === 'string' ? { text: sql } : sql;
    return (await withReconnect(() => this.pool.query<R>({ ...config, values: params }), this.retryOptions))
      .rows;
  }

  /**
   * A statement run by every subscription at every page or heartbeat, named (when `prepared`) so
   * that each connection parses and plans it once: planning the grouped ack took about as long as
   * running and committing it.
   */
  private named(what: string, text: string): { name?: string; text: string } {
    return this.prepared ? { name: statementName(what, this.s), text } : { text };
  }

  /** Runs `fn` in one transaction on one connection (retried whole after a connection fault). */
  private tx<T>(fn: (q: Query) => Promise<T>): Promise<T> {
    return withReconnect(async () => {
      const { client, release } = await checkout(this.pool);
      const q: Query = async <R extends object>(sql: string, params: unknown[] = []) =>
        (await client.query<R>(sql, params)).rows;
      try {
        await client.query('BEGIN');
        const result = await fn(q);
        await client.query('COMMIT');
        release();
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        release(err instanceof Error ? err : true);
        throw err;
      }
    }, this.retryOptions);
  }
}

type Query = <R extends object = Record<string, unknown>>(sql: string, params?: unknown[]) => Promise<R[]>;

/** `$2` (the streams) and `$3` (an event id) of `selectedStreams`. */
function selectorParams(selector: BackendSelector): [string[] | null, string | null] {
  if ('streams' in selector) return [[...selector.streams], null];
  if ('stream' in selector) return [[selector.stream], null];
  return [null, selector.id];
}

function iso(d: Date | null): string | null {
  return d === null ? null : isoTime(d);
}

function toState(row: ConsumerRow): ConsumerRecord {
  return {
    name: row.name,
    filter: row.filter,
    position: Number(row.position),
    owner: row.owner,
    epoch: Number(row.epoch),
    leaseExpiresAt: iso(row.lease_expires_at),
    status: row.status,
    lastError: row.last_error,
    failedEvent: row.failed_event,
    parked: Number(row.parked),
    pause: toPause(row),
    createdAt: isoTime(row.created_at),
    updatedAt: isoTime(row.updated_at),
  };
}

function toPause(row: PauseColumns): ConsumerPause | null {
  if (row.pause_reason === null) return null;
  return { reason: row.pause_reason, since: iso(row.paused_at) ?? '', by: row.paused_by };
}

function toRecord(row: LetterRow): DeadLetterRecord {
  return {
    consumer: row.consumer,
    event: row.event,
    reason: row.reason,
    error: row.error,
    attempts: row.attempts,
    status: row.status,
    behind: row.behind,
    redrives: row.redrives,
    redriveAt: iso(row.redrive_at),
    parkedAt: isoTime(row.parked_at),
    skippedBy: row.skipped_by,
    skippedAt: iso(row.skipped_at),
  };
}
