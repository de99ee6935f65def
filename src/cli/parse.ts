import { InvalidInputError } from '../core/errors.js';
import type { EventFilter } from '../core/filter.js';
import { parseHistoryTime, type HistoryBoundOptions } from '../core/history.js';
import type { JsonObject, JsonValue } from '../core/json.js';

/** Parses a command-line integer; `field` names the flag in the error, e.g. `--limit`. */
export function parseInteger(value: string | undefined, field: string, min: number): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value.trim()))
    throw new InvalidInputError(field, `must be an integer >= ${min} (got "${value}")`);
  const n = Number(value.trim());
  if (!Number.isSafeInteger(n) || n < min)
    throw new InvalidInputError(field, `must be an integer >= ${min} (got "${value}")`);
  return n;
}

export function requireInteger(value: string | undefined, field: string, min: number): number {
  const n = parseInteger(value, field, min);
  if (n === undefined) throw new InvalidInputError(field, 'is required');
  return n;
}

export function parseJson(text: string, field: string): JsonValue {
  try {
    return JSON.parse(text) as JsonValue;
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new InvalidInputError(field, `must be valid JSON (${why})`);
  }
}

export function parseJsonObject(text: string, field: string): JsonObject {
  const v = parseJson(text, field);
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    throw new InvalidInputError(field, 'must be a JSON object');
  return v;
}

/** Commander collector for repeatable options (`--type a --type b`). */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** Builds a filter from repeatable `--type`, `--category` and `--prefix` options. */
export function filterFrom(opts: { type?: string[]; category?: string[]; prefix?: string[] }): EventFilter {
  const filter: EventFilter = {};
  if (opts.type && opts.type.length > 0) filter.types = opts.type;
  if (opts.category && opts.category.length > 0) filter.categories = opts.category;
  if (opts.prefix && opts.prefix.length > 0) filter.streamPrefixes = opts.prefix;
  return filter;
}

/** `start`, `end` or a position. */
export function parseFrom(value: string | undefined, field = '--from'): 'start' | 'end' | number | undefined {
  if (value === undefined || value === 'start' || value === 'end') return value;
  const n = parseInteger(value, field, 0);
  if (n === undefined) throw new InvalidInputError(field, "must be 'start', 'end' or a position >= 0");
  return n;
}

/** `--as-of`: a global position (digits) or an ISO-8601 time, as the bound of a read. */
export function parseAsOf(value: string | undefined, field = '--as-of'): HistoryBoundOptions {
  if (value === undefined) return {};
  if (/^\d+$/.test(value)) return { toPosition: parseInteger(value, field, 0)! };
  return { toTime: parseHistoryTime(value, field) };
}
