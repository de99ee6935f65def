/**
 * The options of `readStream` and `readAll`, checked as every store checks them (when the read is
 * first iterated): unknown keys, the stream's name, positions, the limit, the filter and the history
 * bound, each refused with the field it names.
 */
import {
  READ_ALL_OPTION_KEYS,
  READ_STREAM_OPTION_KEYS,
  type ReadAllOptions,
  type ReadStreamOptions,
} from './eventStore.js';
import { normalizeFilter, type EventFilter } from './filter.js';
import { parseHistoryBound, type HistoryBound } from './history.js';
import { checkKnownKeys } from './knownKeys.js';
import { validateLimit, validatePosition, validateStreamName } from './validation.js';

/** A `readStream`, checked: its first version, how many events at most, and its history bound. */
export interface StreamRead {
  from: number;
  limit: number | undefined;
  bound: HistoryBound | null;
}

/** A `readAll`, checked: the position it reads after, its normalised filter, how many events at most. */
export interface AllRead {
  after: number;
  filter: EventFilter;
  limit: number | undefined;
}

export function checkStreamRead(stream: string, options: ReadStreamOptions): StreamRead {
  checkKnownKeys(options, READ_STREAM_OPTION_KEYS, 'options');
  validateStreamName(stream);
  const from = options.fromVersion === undefined ? 1 : validatePosition(options.fromVersion, 'fromVersion');
  const limit = validateLimit(options.limit);
  return { from, limit, bound: parseHistoryBound(options) };
}

export function checkAllRead(options: ReadAllOptions): AllRead {
  checkKnownKeys(options, READ_ALL_OPTION_KEYS, 'options');
  const after = options.after === undefined ? 0 : validatePosition(options.after, 'after');
  const filter = normalizeFilter(options.filter);
  return { after, filter, limit: validateLimit(options.limit) };
}
