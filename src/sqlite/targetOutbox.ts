import type Database from 'better-sqlite3';
import {
  emptyCounts,
  parseJson,
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
import { LEDGER_OF_CONSUMER } from './ledgerSql.js';
import type { Migration } from './migrations.js';

/** Target migration 2: the effect outbox, consumer versions and active versions. */
export const OUTBOX_MIGRATION: Migration = {
  version: 2,
  name: 'effect outbox, consumer versions, active versions',
  up: (db) => {
    db.exec(`
      CREATE TABLE idem_effects (
        id              INTEGER PRIMARY KEY,
        scope           TEXT    NOT NULL,
        key             TEXT    NOT NULL,
        kind            TEXT    NOT NULL,
        payload         TEXT    NOT NULL,
        consumer        TEXT    NOT NULL,
        event_id        TEXT    NOT NULL,
        position        INTEGER NOT NULL,
        status          TEXT    NOT NULL,
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL,
        lease_owner     TEXT,
        lease_until     INTEGER,
        result          TEXT,
        last_error      TEXT,
        created_at      TEXT    NOT NULL,
        updated_at      TEXT    NOT NULL,
        UNIQUE (scope, key)
      );
      CREATE INDEX idem_effects_due ON idem_effects (status, next_attempt_at);
      CREATE TABLE idem_consumer_versions (
        consumer   TEXT    PRIMARY KEY,
        base       TEXT    NOT NULL,
        scope      TEXT    NOT NULL,
        live_from  INTEGER NOT NULL,
        rebuild_of TEXT,
        created_at TEXT    NOT NULL
      ) WITHOUT ROWID;
      CREATE TABLE idem_active_versions (
        base        TEXT    PRIMARY KEY,
        consumer    TEXT    NOT NULL,
        position    INTEGER NOT NULL,
        previous    TEXT,
        promoted_at TEXT    NOT NULL
      ) WITHOUT ROWID;
    `);
  },
};

type Statement = Database.Statement<unknown[], unknown>;

interface EffectRow {
  id: number;
  scope: string;
  key: string;
  kind: string;
  payload: string;
  consumer: string;
  event_id: string;
  position: number;
  status: EffectStatus;
  attempts: number;
  next_attempt_at: number;
  lease_owner: string | null;
  lease_until: number | null;
  result: string | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

interface VersionRow {
  consumer: string;
  base: string;
  scope: string;
  live_from: number;
  rebuild_of: string | null;
  created_at: string;
}

interface ActiveRow {
  base: string;
  consumer: string;
  position: number;
  previous: string | null;
  promoted_at: string;
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

function toRecord(r: EffectRow): EffectRecord {
  const pending = r.status === 'pending';
  return {
    scope: r.scope,
    key: r.key,
    idempotencyKey: idempotencyKey(r.scope, r.key),
    kind: r.kind,
    payload: parseJson(r.payload),
    consumer: r.consumer,
    eventId: r.event_id,
    position: r.position,
    status: r.status,
    attempts: r.attempts,
    result: parseJson(r.result),
    lastError: r.last_error,
    nextAttemptAt: pending ? iso(r.next_attempt_at) : null,
    leaseOwner: r.lease_owner,
    leaseUntil: iso(r.lease_until),
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

function toVersion(r: VersionRow): ConsumerVersionRecord {
  return {
    consumer: r.consumer,
    base: r.base,
    scope: r.scope,
    liveFrom: r.live_from,
    rebuildOf: r.rebuild_of,
    createdAt: r.created_at,
  };
}

function toActive(r: ActiveRow): ActiveVersionRecord {
  return {
    base: r.base,
    consumer: r.consumer,
    position: r.position,
    previous: r.previous,
    promotedAt: r.promoted_at,
  };
}

/** Statements are prepared once per connection. */
const cache = new WeakMap<Database.Database, Map<string, Statement>>();

function stmt(db: Database.Database, sql: string): Statement {
  let m = cache.get(db);
  if (!m) {
    m = new Map();
    cache.set(db, m);
  }
  let s = m.get(sql);
  if (!s) {
    s = db.prepare(sql);
    m.set(sql, s);
  }
  return s;
}

/** The outbox of the SQLite target. A claim is one UPDATE ... RETURNING inside BEGIN IMMEDIATE: processes take turns. */
export class SqliteOutbox implements OutboxDialect<Database.Database> {
  insert(db: Database.Database, e: NewEffect): Promise<boolean> {
    const now = new Date();
    const r = stmt(
      db,
      `INSERT INTO idem_effects (scope, key, kind, payload, consumer, event_id, position, status, next_attempt_at, created_at, updated_at, traceparent)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope, key) DO NOTHING`,
    ).run(
      e.scope,
      e.key,
      e.kind,
      e.payload,
      e.consumer,
      e.eventId,
      e.position,
      e.status,
      now.getTime(),
      now.toISOString(),
      now.toISOString(),
      e.traceparent,
    );
    return Promise.resolve(r.changes === 1);
  }

  async registerVersion(
    db: Database.Database,
    v: Omit<ConsumerVersionRecord, 'createdAt'>,
  ): Promise<ConsumerVersionRecord> {
    stmt(
      db,
      `INSERT INTO idem_consumer_versions (consumer, base, scope, live_from, rebuild_of, created_at) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (consumer) DO NOTHING`,
    ).run(v.consumer, v.base, v.scope, v.liveFrom, v.rebuildOf, new Date().toISOString());
    return (await this.getVersion(db, v.consumer))!;
  }

  getVersion(db: Database.Database, consumer: string): Promise<ConsumerVersionRecord | null> {
    const r = stmt(db, 'SELECT * FROM idem_consumer_versions WHERE consumer = ?').get(consumer) as
      VersionRow | undefined;
    return Promise.resolve(r ? toVersion(r) : null);
  }

  listVersions(db: Database.Database): Promise<ConsumerVersionRecord[]> {
    const rows = stmt(
      db,
      'SELECT * FROM idem_consumer_versions ORDER BY base, created_at, consumer',
    ).all() as VersionRow[];
    return Promise.resolve(rows.map(toVersion));
  }

  claim(db: Database.Database, req: ClaimRequest): Promise<ClaimedEffect[]> {
    const now = Date.now();
    const rows = stmt(
      db,
      `UPDATE idem_effects SET lease_owner = ?, lease_until = ?, attempts = attempts + 1, updated_at = ?
       WHERE id IN (
         SELECT id FROM idem_effects
         WHERE status = 'pending' AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until < ?)
           AND kind IN (SELECT value FROM json_each(?))
         ORDER BY id LIMIT ?)
       RETURNING id, scope, key, kind, payload, attempts, consumer, traceparent`,
    ).all(
      req.owner,
      now + req.leaseMs,
      new Date(now).toISOString(),
      now,
      now,
      JSON.stringify(req.kinds),
      req.limit,
    ) as {
      id: number;
      scope: string;
      key: string;
      kind: string;
      payload: string;
      attempts: number;
      consumer: string;
      traceparent: string | null;
    }[];
    rows.sort((a, b) => a.id - b.id);
    return Promise.resolve(rows.map((r) => ({ ...r, payload: parseJson(r.payload) })));
  }

  extendLease(db: Database.Database, id: number, owner: string, leaseMs: number): Promise<boolean> {
    const r = stmt(
      db,
      `UPDATE idem_effects SET lease_until = ? WHERE id = ? AND lease_owner = ? AND status = 'pending'`,
    ).run(Date.now() + leaseMs, id, owner);
    return Promise.resolve(r.changes === 1);
  }

  complete(db: Database.Database, id: number, owner: string, result: string): Promise<boolean> {
    const r = stmt(
      db,
      `UPDATE idem_effects SET status = 'done', result = ?, lease_owner = NULL, lease_until = NULL, last_error = NULL, updated_at = ?
       WHERE id = ? AND lease_owner = ? AND status = 'pending'`,
    ).run(result, new Date().toISOString(), id, owner);
    return Promise.resolve(r.changes === 1);
  }

  release(
    db: Database.Database,
    id: number,
    owner: string,
    error: string,
    retryInMs: number | null,
  ): Promise<boolean> {
    const now = Date.now();
    const r = stmt(
      db,
      `UPDATE idem_effects SET status = ?, next_attempt_at = ?, last_error = ?, lease_owner = NULL, lease_until = NULL, updated_at = ?
       WHERE id = ? AND lease_owner = ? AND status = 'pending'`,
    ).run(
      retryInMs === null ? 'failed' : 'pending',
      now + (retryInMs ?? 0),
      error,
      new Date(now).toISOString(),
      id,
      owner,
    );
    return Promise.resolve(r.changes === 1);
  }

  list(db: Database.Database, req: ListRequest): Promise<EffectRecord[]> {
    const rows = stmt(
      db,
      `SELECT * FROM idem_effects WHERE (@status IS NULL OR status = @status) AND (@scope IS NULL OR scope = @scope) ORDER BY id LIMIT @limit`,
    ).all({ status: req.status ?? null, scope: req.scope ?? null, limit: req.limit }) as EffectRow[];
    return Promise.resolve(rows.map(toRecord));
  }

  get(db: Database.Database, scope: string, key: string): Promise<EffectRecord | null> {
    const r = stmt(db, 'SELECT * FROM idem_effects WHERE scope = ? AND key = ?').get(scope, key) as
      EffectRow | undefined;
    return Promise.resolve(r ? toRecord(r) : null);
  }

  retry(db: Database.Database, which: { scope: string; key: string } | 'all-failed'): Promise<number> {
    const now = Date.now();
    const set = `SET status = 'pending', attempts = 0, next_attempt_at = ?, lease_owner = NULL, lease_until = NULL, updated_at = ?`;
    const r =
      which === 'all-failed'
        ? stmt(db, `UPDATE idem_effects ${set} WHERE status = 'failed'`).run(now, new Date(now).toISOString())
        : stmt(
            db,
            `UPDATE idem_effects ${set} WHERE scope = ? AND key = ? AND status IN ('failed', 'suppressed')`,
          ).run(now, new Date(now).toISOString(), which.scope, which.key);
    return Promise.resolve(r.changes);
  }

  counts(db: Database.Database): Promise<EffectCounts> {
    const c = emptyCounts();
    for (const r of stmt(db, 'SELECT status, count(*) AS n FROM idem_effects GROUP BY status').all() as {
      status: EffectStatus;
      n: number;
    }[]) {
      c[r.status] = r.n;
    }
    return Promise.resolve(c);
  }

  getActive(db: Database.Database, base: string): Promise<ActiveVersionRecord | null> {
    const r = stmt(db, 'SELECT * FROM idem_active_versions WHERE base = ?').get(base) as
      ActiveRow | undefined;
    return Promise.resolve(r ? toActive(r) : null);
  }

  listActive(db: Database.Database): Promise<ActiveVersionRecord[]> {
    return Promise.resolve(
      (stmt(db, 'SELECT * FROM idem_active_versions ORDER BY base').all() as ActiveRow[]).map(toActive),
    );
  }

  async setActive(
    db: Database.Database,
    rec: Omit<ActiveVersionRecord, 'promotedAt' | 'previous'>,
  ): Promise<ActiveVersionRecord> {
    const before = await this.getActive(db, rec.base);
    const previous =
      before && before.consumer !== rec.consumer ? before.consumer : (before?.previous ?? null);
    stmt(
      db,
      `INSERT INTO idem_active_versions (base, consumer, position, previous, promoted_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (base) DO UPDATE SET consumer = excluded.consumer, position = excluded.position,
         previous = excluded.previous, promoted_at = excluded.promoted_at`,
    ).run(rec.base, rec.consumer, rec.position, previous, new Date().toISOString());
    return (await this.getActive(db, rec.base))!;
  }

  resetLedger(db: Database.Database, consumer: string): Promise<LedgerReset> {
    return Promise.resolve({
      ledgerRows: stmt(db, `DELETE ${LEDGER_OF_CONSUMER}`).run(consumer).changes,
      checkpoints: stmt(db, 'DELETE FROM idem_checkpoints WHERE consumer = ?').run(consumer).changes,
      entityVersions: stmt(db, 'DELETE FROM idem_entity_versions WHERE consumer = ?').run(consumer).changes,
    });
  }
}
