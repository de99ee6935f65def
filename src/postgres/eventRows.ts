import type { RecordedEvent } from '../core/event.js';
import type { EventFilter } from '../core/filter.js';
import type { ExistingEvent } from '../core/idempotency.js';
import type { JsonObject, JsonValue } from '../core/json.js';
import { contentKey } from '../core/validation.js';

/** A row of `<schema>.events` as `pg` returns it (bigint as text, json parsed, timestamptz as Date). */
export interface PostgresEventRow {
  position: string;
  id: string;
  stream: string;
  version: number;
  type: string;
  data: JsonValue;
  metadata: JsonObject;
  recorded_at: Date;
}

export const EVENT_COLUMNS = 'position, id, stream, version, type, data, metadata, recorded_at';

export function toRecordedEvent(row: PostgresEventRow): RecordedEvent {
  return {
    id: row.id,
    stream: row.stream,
    type: row.type,
    version: row.version,
    position: Number(row.position),
    data: row.data,
    metadata: row.metadata,
    recordedAt: row.recorded_at.toISOString(),
  };
}

/**
 * A timestamptz expression formatted by the server as `toISOString()` would (UTC, milliseconds
 * truncated like pg's own Date parsing), which saves parsing a Date per row and formatting it again.
 */
export function isoText(expression: string): string {
  return `to_char(${expression} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
}

/** The columns of the read paths, in the order of `PostgresEventTuple` (`recorded_at` as `isoText`). */
export const EVENT_TUPLE_COLUMNS = `position, id, stream, version, type, data, metadata,
  ${isoText('recorded_at')} AS recorded_at`;

/**
 * `EVENT_TUPLE_COLUMNS` for a read of one stream, whose name the reader knows: the stream column is
 * a NULL (no text to send and decode per row), filled in by `tuplesToRecordedEvents(rows, stream)`.
 */
export const STREAM_TUPLE_COLUMNS = EVENT_TUPLE_COLUMNS.replace('stream,', 'NULL::text AS stream,');

/**
 * A row of `EVENT_TUPLE_COLUMNS` (or `STREAM_TUPLE_COLUMNS`, whose stream is null) as `pg` returns it
 * with `rowMode: 'array'` (json parsed, bigint as text).
 */
export type PostgresEventTuple = [
  position: string,
  id: string,
  stream: string | null,
  version: number,
  type: string,
  data: JsonValue,
  metadata: JsonObject,
  recordedAt: string,
];

/**
 * The events of one page of array rows, in order. `stream`: the stream of every row, for rows of
 * `STREAM_TUPLE_COLUMNS`.
 */
export function tuplesToRecordedEvents(
  rows: readonly PostgresEventTuple[],
  stream?: string,
): RecordedEvent[] {
  const out = new Array<RecordedEvent>(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!;
    out[i] = {
      id: row[1],
      stream: stream ?? (row[2] as string),
      type: row[4],
      version: row[3],
      position: Number(row[0]),
      data: row[5],
      metadata: row[6],
      recordedAt: row[7],
    };
  }
  return out;
}

export function toExistingEvent(row: PostgresEventRow): ExistingEvent {
  return {
    id: row.id,
    stream: row.stream,
    version: row.version,
    position: Number(row.position),
    contentKey: contentKey(row.type, row.data, row.metadata),
  };
}

/** `(stream_hash % count)`, as written in the partition index of `count` and in the reads it serves. */
export function partitionExpression(count: number): string {
  return `(stream_hash % ${Math.trunc(count)})`;
}

/**
 * The condition `position > after` (and `<= upTo`), written for a partition filter as row comparisons
 * over its index's columns, `(stream_hash % count, position)`: then the partition index is an index
 * condition on both, and the primary key, which cannot serve it, is not chosen instead. (Given
 * `position > after` alone, the planner prefers the primary key's range and filters the partition's
 * events out of it: 16 partitions read 16 times the rows.)
 */
export function positionRange(filter: EventFilter, after: string, upTo?: string): string {
  if (!filter.partition)
    return upTo === undefined ? `position > ${after}` : `position > ${after} AND position <= ${upTo}`;
  const expr = partitionExpression(filter.partition.count);
  const index = Math.trunc(filter.partition.index);
  const from = `(${expr}, position) > (${index}, ${after})`;
  return upTo === undefined ? from : `${from} AND (${expr}, position) <= (${index}, ${upTo})`;
}

/**
 * SQL for a normalised filter, as a condition over the `events` columns plus its parameters,
 * numbered from `$firstParam`. A category is the part of a stream name before its first `-`, so a
 * category containing `-` matches nothing; a stream prefix matches by `starts_with` (no LIKE
 * wildcards to escape).
 */
export function filterSql(filter: EventFilter, firstParam: number): { where: string; params: string[][] } {
  const parts: string[] = [];
  const params: string[][] = [];
  const next = (value: string[]): string => {
    params.push(value);
    return `$${firstParam + params.length - 1}::text[]`;
  };
  if (filter.types && filter.types.length > 0) parts.push(`type = ANY(${next(filter.types)})`);
  const streamParts: string[] = [];
  const categories = filter.categories ?? [];
  const prefixes = filter.streamPrefixes ?? [];
  if (categories.length > 0) streamParts.push(`split_part(stream, '-', 1) = ANY(${next(categories)})`);
  // `^@` is `starts_with` as an operator, so that ANY applies it to each prefix without a subquery
  // per row.
  if (prefixes.length > 0) streamParts.push(`stream ^@ ANY(${next(prefixes)})`);
  if (streamParts.length > 0) parts.push(`(${streamParts.join(' OR ')})`);
  // Inline (validated integers), written as the partition index's expression so that it is used.
  if (filter.partition)
    parts.unshift(`${partitionExpression(filter.partition.count)} = ${Math.trunc(filter.partition.index)}`);
  return { where: parts.length > 0 ? parts.join(' AND ') : 'true', params };
}
