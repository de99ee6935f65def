/**
 * The output every fault-scenario consumer writes in its handler, inside the target transaction:
 * one row per applied event (with how many times it was applied) and one row per entity with the last
 * applied version and how many times an event arrived out of order. Counting these rows against the
 * store's events gives lost, doubled and out-of-order.
 */
import type Database from 'better-sqlite3';
import type { PoolClient, Pool } from 'pg';
import type { RecordedEvent } from '../src/core/event.js';

const SQLITE_TABLES = `
CREATE TABLE IF NOT EXISTS fault_applied (consumer TEXT NOT NULL, event_id TEXT NOT NULL, stream TEXT NOT NULL,
  version INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (consumer, event_id));
CREATE TABLE IF NOT EXISTS fault_entity (consumer TEXT NOT NULL, stream TEXT NOT NULL, last_version INTEGER NOT NULL,
  disorder INTEGER NOT NULL, PRIMARY KEY (consumer, stream));`;

const PG_TABLES = `
CREATE TABLE IF NOT EXISTS fault_applied (consumer text NOT NULL, event_id text NOT NULL, stream text NOT NULL,
  version integer NOT NULL, n integer NOT NULL, PRIMARY KEY (consumer, event_id));
CREATE TABLE IF NOT EXISTS fault_entity (consumer text NOT NULL, stream text NOT NULL, last_version integer NOT NULL,
  disorder integer NOT NULL, PRIMARY KEY (consumer, stream));`;

export function createSqliteOutput(db: Database.Database): void {
  db.exec(SQLITE_TABLES);
}

export async function createPostgresOutput(pool: Pool): Promise<void> {
  // Two processes may start at once: serialise the CREATEs on an advisory lock.
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await c.query('SELECT pg_advisory_xact_lock(7342001)');
    await c.query(PG_TABLES);
    await c.query('COMMIT');
  } catch (err) {
    await c.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    c.release();
  }
}

/** The SQLite handler body: `db` is the target's Database (ctx.tx), inside the batch transaction. */
export function sqliteRecorder(db: Database.Database, consumer: string): (e: RecordedEvent) => void {
  const applied = db.prepare(
    `INSERT INTO fault_applied (consumer, event_id, stream, version, n) VALUES (?, ?, ?, ?, 1)
     ON CONFLICT (consumer, event_id) DO UPDATE SET n = n + 1`,
  );
  const last = db.prepare('SELECT last_version FROM fault_entity WHERE consumer = ? AND stream = ?');
  const entity = db.prepare(
    `INSERT INTO fault_entity (consumer, stream, last_version, disorder) VALUES (?, ?, ?, ?)
     ON CONFLICT (consumer, stream) DO UPDATE SET last_version = excluded.last_version, disorder = disorder + excluded.disorder`,
  );
  return (e) => {
    applied.run(consumer, e.id, e.stream, e.version);
    const row = last.get(consumer, e.stream) as { last_version: number } | undefined;
    const disorder = e.version === (row?.last_version ?? 0) + 1 ? 0 : 1;
    entity.run(consumer, e.stream, e.version, disorder);
  };
}

/** The PostgreSQL handler body: `tx` is the pool client inside the batch's BEGIN. */
export async function postgresRecord(tx: PoolClient, consumer: string, e: RecordedEvent): Promise<void> {
  await tx.query(
    `INSERT INTO fault_applied (consumer, event_id, stream, version, n) VALUES ($1, $2, $3, $4, 1)
     ON CONFLICT (consumer, event_id) DO UPDATE SET n = fault_applied.n + 1`,
    [consumer, e.id, e.stream, e.version],
  );
  const r = await tx.query<{ last_version: number }>(
    'SELECT last_version FROM fault_entity WHERE consumer = $1 AND stream = $2',
    [consumer, e.stream],
  );
  const disorder = e.version === (r.rows[0]?.last_version ?? 0) + 1 ? 0 : 1;
  await tx.query(
    `INSERT INTO fault_entity (consumer, stream, last_version, disorder) VALUES ($1, $2, $3, $4)
     ON CONFLICT (consumer, stream) DO UPDATE SET last_version = excluded.last_version, disorder = fault_entity.disorder + excluded.disorder`,
    [consumer, e.stream, e.version, disorder],
  );
}

export interface AppliedRow {
  event_id: string;
  stream: string;
  version: number;
  n: number;
}

export interface OutputCounts {
  /** Expected events never applied. */
  lost: number;
  /** Extra applications (an event applied n times counts n-1), plus applied events that do not exist. */
  doubled: number;
  /** Events applied out of version order within their entity. */
  outOfOrder: number;
  applied: number;
}

export function countOutput(
  expected: Iterable<Pick<RecordedEvent, 'id'>>,
  applied: readonly AppliedRow[],
  entities: readonly { disorder: number }[],
): OutputCounts {
  const byId = new Map(applied.map((r) => [r.event_id, r]));
  const want = new Set<string>();
  let lost = 0;
  for (const e of expected) {
    want.add(e.id);
    if (!byId.has(e.id)) lost++;
  }
  let doubled = 0;
  for (const r of applied) doubled += want.has(r.event_id) ? r.n - 1 : r.n;
  const outOfOrder = entities.reduce((s, r) => s + r.disorder, 0);
  return { lost, doubled, outOfOrder, applied: applied.length };
}

export function readSqliteOutput(
  db: Database.Database,
  consumer: string,
): { applied: AppliedRow[]; entities: { disorder: number }[] } {
  return {
    applied: db
      .prepare('SELECT event_id, stream, version, n FROM fault_applied WHERE consumer = ?')
      .all(consumer) as AppliedRow[],
    entities: db.prepare('SELECT disorder FROM fault_entity WHERE consumer = ?').all(consumer) as {
      disorder: number;
    }[],
  };
}

export async function readPostgresOutput(
  pool: Pool,
  consumer: string,
): Promise<{ applied: AppliedRow[]; entities: { disorder: number }[] }> {
  const a = await pool.query<AppliedRow>(
    'SELECT event_id, stream, version, n FROM fault_applied WHERE consumer = $1',
    [consumer],
  );
  const e = await pool.query<{ disorder: number }>('SELECT disorder FROM fault_entity WHERE consumer = $1', [
    consumer,
  ]);
  return { applied: a.rows, entities: e.rows };
}
