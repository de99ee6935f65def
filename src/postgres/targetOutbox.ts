import type { PoolClient } from 'pg';
import {
  emptyCounts,
  type ClaimRequest,
  type LedgerReset,
  type ListRequest,
  type OutboxDialect,
} from '../core/effectOutbox.js';
import { idempotencyKey } from '../core/versionedName.js';
import type {
  ActiveVersionRecord,
  ClaimedEffect,
  ConsumerVersionRecord,
  EffectCounts,
  EffectRecord,
  EffectStatus,
  NewEffect,
} from '../core/effectTypes.js';
import { quoteSchema, statementName } from './schemaName.js';
import type { TargetMigration } from './targetMigrations.js';

/** Target migration 2: the effect outbox, consumer versions and active versions. */
export const OUTBOX_MIGRATION: TargetMigration = {
  version: 2,
  name: 'effect outbox, consumer versions, active versions',
  sql: (s) => `
    CREATE TABLE ${s}.target_effects (
      id              bigserial   PRIMARY KEY,
      scope           text        NOT NULL,
      key             text        NOT NULL,
      kind            text        NOT NULL,
      payload         jsonb       NOT NULL,
      consumer        text        NOT NULL,
      event_id        text        NOT NULL,
      position        bigint      NOT NULL,
      status          text        NOT NULL,
      attempts        integer     NOT NULL DEFAULT 0,
      next_attempt_at timestamptz NOT NULL DEFAULT now(),
      lease_owner     text,
      lease_until     timestamptz,
      result          jsonb,
      last_error      text,
      created_at      timestamptz NOT NULL DEFAULT now(),
      updated_at      timestamptz NOT NULL DEFAULT now(),
      UNIQUE (scope, key)
    );
    CREATE INDEX target_effects_due ON ${s}.target_effects (status, next_attempt_at);
    CREATE TABLE ${s}.target_consumer_versions (
      consumer   text        PRIMARY KEY,
      base       text        NOT NULL,
      scope      text        NOT NULL,
      live_from  bigint      NOT NULL,
      rebuild_of text,
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE ${s}.target_active_versions (
      base        text        PRIMARY KEY,
      consumer    text        NOT NULL,
      position    bigint      NOT NULL,
      previous    text,
      promoted_at timestamptz NOT NULL DEFAULT now()
    );
  `,
};

interface EffectRow {
  scope: string;
  key: string;
  kind: string;
  payload: unknown;
  consumer: string;
  event_id: string;
  position: number;
  status: EffectStatus;
  attempts: number;
  next_attempt_at: Date;
  lease_owner: string | null;
  lease_until: Date | null;
  result: unknown;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
}

interface VersionRow {
  consumer: string;
  base: string;
  scope: string;
  live_from: number;
  rebuild_of: string | null;
  created_at: Date;
}

interface ActiveRow {
  base: string;
  consumer: string;
  position: number;
  previous: string | null;
  promoted_at: Date;
}

const EFFECT_COLUMNS = `scope, key, kind, payload, consumer, event_id, position::float8 AS position, status, attempts,
  next_attempt_at, lease_owner, lease_until, result, last_error, created_at, updated_at`;

function toRecord(r: EffectRow): EffectRecord {
  return {
    scope: r.scope,
    key: r.key,
    idempotencyKey: idempotencyKey(r.scope, r.key),
    kind: r.kind,
    payload: r.payload,
    consumer: r.consumer,
    eventId: r.event_id,
    position: r.position,
    status: r.status,
    attempts: r.attempts,
    result: r.result ?? null,
    lastError: r.last_error,
    nextAttemptAt: r.status === 'pending' ? r.next_attempt_at.toISOString() : null,
    leaseOwner: r.lease_owner,
    leaseUntil: r.lease_until ? r.lease_until.toISOString() : null,
    createdAt: r.created_at.toISOString(),
    updatedAt: r.updated_at.toISOString(),
  };
}

function toVersion(r: VersionRow): ConsumerVersionRecord {
  return {
    consumer: r.consumer,
    base: r.base,
    scope: r.scope,
    liveFrom: r.live_from,
    rebuildOf: r.rebuild_of,
    createdAt: r.created_at.toISOString(),
  };
}

function toActive(r: ActiveRow): ActiveVersionRecord {
  return {
    base: r.base,
    consumer: r.consumer,
    position: r.position,
    previous: r.previous,
    promotedAt: r.promoted_at.toISOString(),
  };
}

/**
 * The outbox of the PostgreSQL target. Dispatchers claim with `FOR UPDATE SKIP LOCKED` and a lease
 * committed at once, so no transaction stays open during a call to the external system.
 */
export class PostgresOutbox implements OutboxDialect<PoolClient> {
  private readonly s: string;

  constructor(schema: string) {
    this.s = quoteSchema(schema);
  }

  /**
   * A statement run per effect (or per claim), named so that each connection parses and plans it
   * once, as the target's own statements: unnamed, planning a completion cost about a fifth of its
   * transaction.
   */
  private named(
    what: string,
    text: string,
    values: unknown[],
  ): { name: string; text: string; values: unknown[] } {
    return { name: statementName(`effects_${what}`, this.s), text, values };
  }

  async insert(tx: PoolClient, e: NewEffect): Promise<boolean> {
    const r = await tx.query(
      this.named(
        'insert',
        `INSERT INTO ${this.s}.target_effects (scope, key, kind, payload, consumer, event_id, position, status, traceparent)
       VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9) ON CONFLICT (scope, key) DO NOTHING`,
        [e.scope, e.key, e.kind, e.payload, e.consumer, e.eventId, e.position, e.status, e.traceparent],
      ),
    );
    return r.rowCount === 1;
  }

  async registerVersion(
    tx: PoolClient,
    v: Omit<ConsumerVersionRecord, 'createdAt'>,
  ): Promise<ConsumerVersionRecord> {
    await tx.query(
      `INSERT INTO ${this.s}.target_consumer_versions (consumer, base, scope, live_from, rebuild_of) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (consumer) DO NOTHING`,
      [v.consumer, v.base, v.scope, v.liveFrom, v.rebuildOf],
    );
    return (await this.getVersion(tx, v.consumer))!;
  }

  private versionSql(where: string): string {
    return `SELECT consumer, base, scope, live_from::float8 AS live_from, rebuild_of, created_at FROM ${this.s}.target_consumer_versions ${where}`;
  }

  async getVersion(tx: PoolClient, consumer: string): Promise<ConsumerVersionRecord | null> {
    const r = await tx.query<VersionRow>(this.versionSql('WHERE consumer = $1'), [consumer]);
    return r.rows[0] ? toVersion(r.rows[0]) : null;
  }

  async listVersions(tx: PoolClient): Promise<ConsumerVersionRecord[]> {
    const r = await tx.query<VersionRow>(this.versionSql('ORDER BY base, created_at, consumer'));
    return r.rows.map(toVersion);
  }

  async claim(tx: PoolClient, req: ClaimRequest): Promise<ClaimedEffect[]> {
    const r = await tx.query<{
      id: number;
      scope: string;
      key: string;
      kind: string;
      payload: unknown;
      attempts: number;
      consumer: string;
      traceparent: string | null;
    }>(
      this.named(
        'claim',
        `WITH due AS (
         SELECT id FROM ${this.s}.target_effects
         WHERE status = 'pending' AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
           AND kind = ANY($2::text[])
         ORDER BY id LIMIT $4
         FOR UPDATE SKIP LOCKED)
       UPDATE ${this.s}.target_effects e
       SET lease_owner = $1, lease_until = now() + $3 * interval '1 millisecond', attempts = e.attempts + 1, updated_at = now()
       FROM due WHERE e.id = due.id
       RETURNING e.id::float8 AS id, e.scope, e.key, e.kind, e.payload, e.attempts, e.consumer, e.traceparent`,
        [req.owner, req.kinds, req.leaseMs, req.limit],
      ),
    );
    return r.rows.sort((a, b) => a.id - b.id);
  }

  async extendLease(tx: PoolClient, id: number, owner: string, leaseMs: number): Promise<boolean> {
    const r = await tx.query(
      this.named(
        'extend_lease',
        `UPDATE ${this.s}.target_effects SET lease_until = now() + $3 * interval '1 millisecond'
       WHERE id = $1 AND lease_owner = $2 AND status = 'pending'`,
        [id, owner, leaseMs],
      ),
    );
    return r.rowCount === 1;
  }

  async complete(tx: PoolClient, id: number, owner: string, result: string): Promise<boolean> {
    const r = await tx.query(
      this.named(
        'complete',
        `UPDATE ${this.s}.target_effects SET status = 'done', result = $3::jsonb, lease_owner = NULL, lease_until = NULL,
         last_error = NULL, updated_at = now()
       WHERE id = $1 AND lease_owner = $2 AND status = 'pending'`,
        [id, owner, result],
      ),
    );
    return r.rowCount === 1;
  }

  async release(
    tx: PoolClient,
    id: number,
    owner: string,
    error: string,
    retryInMs: number | null,
  ): Promise<boolean> {
    const r = await tx.query(
      this.named(
        'release',
        `UPDATE ${this.s}.target_effects SET status = $3, next_attempt_at = now() + $4 * interval '1 millisecond', last_error = $5,
         lease_owner = NULL, lease_until = NULL, updated_at = now()
       WHERE id = $1 AND lease_owner = $2 AND status = 'pending'`,
        [id, owner, retryInMs === null ? 'failed' : 'pending', retryInMs ?? 0, error],
      ),
    );
    return r.rowCount === 1;
  }

  async list(tx: PoolClient, req: ListRequest): Promise<EffectRecord[]> {
    const r = await tx.query<EffectRow>(
      `SELECT ${EFFECT_COLUMNS} FROM ${this.s}.target_effects
       WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR scope = $2) ORDER BY id LIMIT $3`,
      [req.status ?? null, req.scope ?? null, req.limit],
    );
    return r.rows.map(toRecord);
  }

  async get(tx: PoolClient, scope: string, key: string): Promise<EffectRecord | null> {
    const r = await tx.query<EffectRow>(
      `SELECT ${EFFECT_COLUMNS} FROM ${this.s}.target_effects WHERE scope = $1 AND key = $2`,
      [scope, key],
    );
    return r.rows[0] ? toRecord(r.rows[0]) : null;
  }

  async retry(tx: PoolClient, which: { scope: string; key: string } | 'all-failed'): Promise<number> {
    const set = `SET status = 'pending', attempts = 0, next_attempt_at = now(), lease_owner = NULL, lease_until = NULL, updated_at = now()`;
    const r =
      which === 'all-failed'
        ? await tx.query(`UPDATE ${this.s}.target_effects ${set} WHERE status = 'failed'`)
        : await tx.query(
            `UPDATE ${this.s}.target_effects ${set} WHERE scope = $1 AND key = $2 AND status IN ('failed', 'suppressed')`,
            [which.scope, which.key],
          );
    return r.rowCount ?? 0;
  }

  async counts(tx: PoolClient): Promise<EffectCounts> {
    const c = emptyCounts();
    const r = await tx.query<{ status: EffectStatus; n: number }>(
      `SELECT status, count(*)::int AS n FROM ${this.s}.target_effects GROUP BY status`,
    );
    for (const row of r.rows) c[row.status] = row.n;
    return c;
  }

  private activeSql(where: string): string {
    return `SELECT base, consumer, position::float8 AS position, previous, promoted_at FROM ${this.s}.target_active_versions ${where}`;
  }

  async getActive(tx: PoolClient, base: string): Promise<ActiveVersionRecord | null> {
    const r = await tx.query<ActiveRow>(this.activeSql('WHERE base = $1'), [base]);
    return r.rows[0] ? toActive(r.rows[0]) : null;
  }

  async listActive(tx: PoolClient): Promise<ActiveVersionRecord[]> {
    const r = await tx.query<ActiveRow>(this.activeSql('ORDER BY base'));
    return r.rows.map(toActive);
  }

  async setActive(
    tx: PoolClient,
    rec: Omit<ActiveVersionRecord, 'promotedAt' | 'previous'>,
  ): Promise<ActiveVersionRecord> {
    const before = await this.getActive(tx, rec.base);
    const previous =
      before && before.consumer !== rec.consumer ? before.consumer : (before?.previous ?? null);
    await tx.query(
      `INSERT INTO ${this.s}.target_active_versions (base, consumer, position, previous) VALUES ($1, $2, $3, $4)
       ON CONFLICT (base) DO UPDATE SET consumer = excluded.consumer, position = excluded.position,
         previous = excluded.previous, promoted_at = now()`,
      [rec.base, rec.consumer, rec.position, previous],
    );
    return (await this.getActive(tx, rec.base))!;
  }

  async resetLedger(tx: PoolClient, consumer: string): Promise<LedgerReset> {
    const del = async (table: string): Promise<number> =>
      (await tx.query(`DELETE FROM ${this.s}.${table} WHERE consumer = $1`, [consumer])).rowCount ?? 0;
    return {
      ledgerRows: await del('target_ledger'),
      checkpoints: await del('target_checkpoints'),
      entityVersions: await del('target_entity_versions'),
    };
  }
}
