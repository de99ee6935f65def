import type Database from 'better-sqlite3';
import type { RecordedEvent } from '../core/event.js';
import type { EventFilter } from '../core/filter.js';
import type { JsonObject, JsonValue } from '../core/json.js';
import { contentKey } from '../core/validation.js';
import type { ExistingEvent } from '../core/idempotency.js';

/** A row of `idem_events` as better-sqlite3 returns it. */
export interface EventRow {
  position: number;
  id: string;
  stream: string;
  version: number;
  type: string;
  data: string;
  metadata: string;
  recorded_at: string;
}

export const EVENT_COLUMNS = 'position, id, stream, version, type, data, metadata, recorded_at';

export function toRecordedEvent(row: EventRow): RecordedEvent {
  return {
    id: row.id,
    stream: row.stream,
    type: row.type,
    version: row.version,
    position: row.position,
    data: JSON.parse(row.data) as JsonValue,
    metadata: JSON.parse(row.metadata) as JsonObject,
    recordedAt: row.recorded_at,
  };
}

/**
 * A row of `idem_events` read in raw mode (`statement.raw(true)`): the `EVENT_COLUMNS` as an array.
 * The read paths use it because better-sqlite3 builds an array per row faster than an object with
 * eight named properties, and the row is garbage as soon as the event is built.
 */
export type EventTuple = [
  position: number,
  id: string,
  stream: string,
  version: number,
  type: string,
  data: string,
  metadata: string,
  recordedAt: string,
];

export function tupleToRecordedEvent(row: EventTuple): RecordedEvent {
  return {
    id: row[1],
    stream: row[2],
    type: row[4],
    version: row[3],
    position: row[0],
    data: JSON.parse(row[5]) as JsonValue,
    metadata: JSON.parse(row[6]) as JsonObject,
    recordedAt: row[7],
  };
}

/** The events of one page of raw rows, in order. */
export function tuplesToRecordedEvents(rows: readonly EventTuple[]): RecordedEvent[] {
  const out = new Array<RecordedEvent>(rows.length);
  for (let i = 0; i < rows.length; i++) out[i] = tupleToRecordedEvent(rows[i]!);
  return out;
}

export function toExistingEvent(row: EventRow): ExistingEvent {
  return {
    id: row.id,
    stream: row.stream,
    version: row.version,
    position: row.position,
    contentKey: contentKey(
      row.type,
      JSON.parse(row.data) as JsonValue,
      JSON.parse(row.metadata) as JsonObject,
    ),
  };
}

/** The rows already stored under any of `ids`. */
export function selectByIds(db: Database.Database, ids: readonly string[]): EventRow[] {
  const out: EventRow[] = [];
  // Chunks keep the statement under SQLite's bound-parameter limit.
  for (let i = 0; i < ids.length; i += 500) {
    const chunk = ids.slice(i, i + 500);
    const sql = `SELECT ${EVENT_COLUMNS} FROM idem_events WHERE id IN (${chunk.map(() => '?').join(',')})`;
    out.push(...(db.prepare(sql).all(...chunk) as EventRow[]));
  }
  return out;
}

/**
 * The length of `s` as SQLite's `substr` counts it: in code points, where a JavaScript length counts
 * UTF-16 units (a character outside the Basic Multilingual Plane, such as an emoji, is two). Names
 * have no unpaired surrogates (validation refuses them), so each pair is one code point.
 */
function codePoints(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) n--;
  }
  return n;
}

/** `stream_hash % count`, as written in the partition index of `count` and in the reads it serves. */
export function partitionExpression(count: number): string {
  return `stream_hash % ${Math.trunc(count)}`;
}

/**
 * Creates, when missing, the index that makes reading one partition of `count` cost in proportion
 * to that partition's events: `(stream_hash % count, position)`. Made on demand, once per count a
 * reader asks for (a consumer group's partition count), since most stores never need one.
 */
export function ensurePartitionIndex(db: Database.Database, count: number): void {
  const n = Math.trunc(count);
  db.exec(
    `CREATE INDEX IF NOT EXISTS idem_events_partition_${n} ON idem_events (${partitionExpression(n)}, position)`,
  );
}

/**
 * SQL for a normalised filter, as a condition and its parameters. A category `c` matches the stream
 * `c` and streams starting with `c-`; a category containing `-` matches nothing, since a category is
 * the part of a stream name before its first `-`.
 */
export function filterSql(filter: EventFilter): { where: string; params: (string | number)[] } {
  const parts: string[] = [];
  const params: (string | number)[] = [];
  if (filter.types && filter.types.length > 0) {
    parts.push(`type IN (${filter.types.map(() => '?').join(',')})`);
    params.push(...filter.types);
  }
  const streamParts: string[] = [];
  for (const c of filter.categories ?? []) {
    if (c.includes('-')) continue;
    streamParts.push('stream = ?', 'substr(stream, 1, ?) = ?');
    params.push(c, codePoints(c) + 1, `${c}-`);
  }
  for (const p of filter.streamPrefixes ?? []) {
    streamParts.push('substr(stream, 1, ?) = ?');
    params.push(codePoints(p), p);
  }
  const constrainsStreams = (filter.categories?.length ?? 0) + (filter.streamPrefixes?.length ?? 0) > 0;
  if (constrainsStreams) parts.push(streamParts.length > 0 ? `(${streamParts.join(' OR ')})` : '0');
  if (filter.partition) {
    // Written as the partition index's expression (the count inline), so that SQLite reads the index.
    parts.unshift(`${partitionExpression(filter.partition.count)} = ?`);
    params.unshift(filter.partition.index);
  }
  return { where: parts.length > 0 ? parts.join(' AND ') : '1', params };
}
