import { InvalidInputError } from './errors.js';
import { streamCategory } from './event.js';
import { checkKnownKeys, type KnownKeys } from './knownKeys.js';
import { MAX_FILTER_ENTRIES, MAX_STREAM_LENGTH, MAX_TYPE_LENGTH } from './limits.js';
import { MAX_PARTITIONS, streamHash } from './streamHash.js';
import { textProblem } from './validation.js';

/** Longest entry of each filter list: a type is within the type limit, the others within a stream name. */
const ENTRY_LENGTH = {
  types: MAX_TYPE_LENGTH,
  categories: MAX_STREAM_LENGTH,
  streamPrefixes: MAX_STREAM_LENGTH,
};

/**
 * Which events a reader or consumer wants. Empty or missing lists do not constrain.
 * An event matches when its type is in `types` (if given) and its stream is in one of the
 * `categories` or starts with one of the `streamPrefixes` (if either is given).
 */
export interface EventFilter {
  types?: string[];
  categories?: string[];
  streamPrefixes?: string[];
  /**
   * Only the streams of one partition: those whose `streamHash` (32-bit FNV-1a of the UTF-8 name)
   * modulo `count` is `index`. A consumer group's members read their partitions with it.
   */
  partition?: PartitionFilter;
}

/** One partition of `count` (1..256): index 0..count-1. */
export interface PartitionFilter {
  count: number;
  index: number;
}

const FILTER_KEYS = {
  types: true,
  categories: true,
  streamPrefixes: true,
  partition: true,
} as const satisfies KnownKeys<EventFilter>;

const PARTITION_KEYS = { count: true, index: true } as const satisfies KnownKeys<PartitionFilter>;

/** A partition filter checked: `count` an integer 1..256, `index` an integer 0..count-1. */
export function normalizePartition(value: unknown, field: string): PartitionFilter {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidInputError(field, 'must be an object { count, index }');
  }
  checkKnownKeys(value, PARTITION_KEYS, field);
  const { count, index } = value as Record<string, unknown>;
  if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > MAX_PARTITIONS) {
    throw new InvalidInputError(`${field}.count`, `must be an integer 1-${MAX_PARTITIONS}`);
  }
  if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= count) {
    throw new InvalidInputError(`${field}.index`, `must be an integer 0-${count - 1} (below count)`);
  }
  return { count, index };
}

/**
 * A filter with sorted, de-duplicated lists and no empty ones; equal filters normalise equally.
 * Each list holds at most `MAX_FILTER_ENTRIES` entries, each a name within the name limits (no
 * control characters, no unpaired surrogates).
 */
export function normalizeFilter(filter: EventFilter | undefined, field = 'filter'): EventFilter {
  if (filter === undefined || filter === null) return {};
  checkKnownKeys(filter, FILTER_KEYS, field);
  const out: EventFilter = {};
  for (const key of ['types', 'categories', 'streamPrefixes'] as const) {
    const list: unknown = filter[key];
    if (list === undefined) continue;
    if (!Array.isArray(list)) throw new InvalidInputError(`${field}.${key}`, 'must be an array of strings');
    if (list.length > MAX_FILTER_ENTRIES) {
      throw new InvalidInputError(
        `${field}.${key}`,
        `must have at most ${MAX_FILTER_ENTRIES} entries (got ${list.length})`,
      );
    }
    const max = ENTRY_LENGTH[key];
    list.forEach((v, i) => {
      if (typeof v !== 'string' || v.length === 0 || v.length > max) {
        throw new InvalidInputError(`${field}.${key}[${i}]`, `must be a string of 1-${max} characters`);
      }
      const problem = textProblem(v);
      if (problem !== null) throw new InvalidInputError(`${field}.${key}[${i}]`, problem);
    });
    const uniq = [...new Set(list as string[])].sort();
    if (uniq.length > 0) out[key] = uniq;
  }
  if (filter.partition !== undefined)
    out.partition = normalizePartition(filter.partition, `${field}.partition`);
  return out;
}

export function filterKey(filter: EventFilter | undefined): string {
  const f = normalizeFilter(filter);
  const lists = [f.types ?? [], f.categories ?? [], f.streamPrefixes ?? []];
  // A filter without a partition keeps the key it always had (stored identities compare by it).
  if (f.partition === undefined) return JSON.stringify(lists);
  return JSON.stringify([...lists, [f.partition.count, f.partition.index]]);
}

export function sameFilter(a: EventFilter | undefined, b: EventFilter | undefined): boolean {
  return filterKey(a) === filterKey(b);
}

export function matchesFilter(
  filter: EventFilter | undefined,
  event: { stream: string; type: string },
): boolean {
  if (!filter) return true;
  return matchesType(filter, event.type) && matchesStream(filter, event.stream);
}

/** The half of `matchesFilter` about the event's type. */
export function matchesType(filter: EventFilter, type: string): boolean {
  return !filter.types || filter.types.length === 0 || filter.types.includes(type);
}

/**
 * The half of `matchesFilter` about the event's stream (partition, categories, prefixes); `hash` is
 * the stream's `streamHash` when the caller has it.
 */
export function matchesStream(filter: EventFilter, stream: string, hash?: number): boolean {
  const { categories, streamPrefixes, partition } = filter;
  if (partition && (hash ?? streamHash(stream)) % partition.count !== partition.index) return false;
  const hasCat = categories !== undefined && categories.length > 0;
  const hasPre = streamPrefixes !== undefined && streamPrefixes.length > 0;
  if (!hasCat && !hasPre) return true;
  if (hasCat && categories.includes(streamCategory(stream))) return true;
  if (hasPre && streamPrefixes.some((p) => stream.startsWith(p))) return true;
  return false;
}

/** One index probe of `streamProbes`: the first stored stream at or after `text` says whether it `wants` it. */
export interface StreamProbe {
  text: string;
  wants: (first: string | undefined) => boolean;
}

/**
 * The probes that tell whether any stored stream is in one of the filter's categories or starts with
 * one of its prefixes, where an index keeps streams in code-point order (so the streams that share a
 * prefix sit together, the first of them at or after the prefix): one per prefix, two per category
 * (`c` is the stream `c` or the prefix `c-`; a category holding '-' names no stream). Null when the
 * filter names neither: any stream may match.
 */
export function streamProbes(filter: EventFilter): StreamProbe[] | null {
  const { categories = [], streamPrefixes = [] } = filter;
  if (categories.length === 0 && streamPrefixes.length === 0) return null;
  const startsWith = (prefix: string): StreamProbe => ({
    text: prefix,
    wants: (first) => first !== undefined && first.startsWith(prefix),
  });
  const probes = streamPrefixes.map(startsWith);
  for (const c of categories) {
    if (c.includes('-')) continue;
    probes.push({ text: c, wants: (first) => first === c }, startsWith(`${c}-`));
  }
  return probes;
}
