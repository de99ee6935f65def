/**
 * Request schemas (zod) for the HTTP bodies, query strings and WebSocket messages. A failure becomes
 * `InvalidInputError` naming the first offending field; the store then applies its own full checks.
 */
import { z } from 'zod';
import { LATENCY_BUCKETS, MONITOR_COUNTERS } from '../core/consumerMonitors.js';
import { InvalidInputError } from '../core/errors.js';
import { MAX_APPENDS_PER_REQUEST, SUBSCRIBE_BOUNDS } from '../core/limits.js';
import { clip } from './clip.js';

/** Formats a zod issue path like `events[2].type`. */
function fieldPath(root: string, path: readonly PropertyKey[], whole = 'body'): string {
  let out = root;
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out.length === 0 ? clip(String(part)) : `.${clip(String(part))}`;
  }
  return out.length === 0 ? whole : out;
}

/** `root` prefixes field paths (`''` for none); `whole` names the value itself when it is the problem. */
export function parseWith<T>(schema: z.ZodType<T>, value: unknown, root: string, whole = 'body'): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  if (issue.code === 'unrecognized_keys') {
    throw new InvalidInputError(
      fieldPath(root, [...issue.path, issue.keys[0] ?? '?'], whole),
      'is not a known field',
    );
  }
  throw new InvalidInputError(fieldPath(root, issue.path, whole), issue.message);
}

const nonNegInt = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const posInt = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);
const shortText = (max: number) => z.string().min(1).max(max);

export const expectedVersionSchema = z.union([z.enum(['any', 'no_stream', 'stream_exists']), nonNegInt], {
  error: "must be 'any', 'no_stream', 'stream_exists' or an integer >= 0",
});

/** `POST /v1/streams/:stream/events`. Each event is checked in full by the store (`events[i].field`). */
export const appendBodySchema = z.strictObject(
  {
    events: z.array(z.unknown(), { error: 'must be an array of events' }),
    expectedVersion: expectedVersionSchema.optional(),
  },
  { error: 'must be a JSON object { events, expectedVersion? }' },
);

/** `POST /v1/appends`: the list only; each entry is checked on its own (`appendItemSchema`). */
export const appendsBodySchema = z.strictObject(
  {
    appends: z
      .array(z.unknown(), { error: 'must be an array of appends' })
      .min(1, { error: 'must hold at least one append' })
      .max(MAX_APPENDS_PER_REQUEST, { error: `must hold at most ${MAX_APPENDS_PER_REQUEST} appends` }),
  },
  { error: 'must be a JSON object { appends }' },
);

/** One entry of `POST /v1/appends`: the body of `POST /v1/streams/:stream/events` plus its stream. */
export const appendItemSchema = z.strictObject(
  {
    stream: z.string({ error: 'must be a string' }),
    events: z.array(z.unknown(), { error: 'must be an array of events' }),
    expectedVersion: expectedVersionSchema.optional(),
  },
  { error: 'must be a JSON object { stream, events, expectedVersion? }' },
);

export const resetBodySchema = z.strictObject(
  { position: nonNegInt },
  { error: 'must be a JSON object { position }' },
);

export const pauseBodySchema = z.strictObject(
  { by: shortText(200).optional() },
  { error: 'must be a JSON object { by? }' },
);

const bulkFields = {
  limit: z.number().int().min(1).max(1_000_000).optional(),
  after: shortText(200).optional(),
  by: shortText(200).optional(),
};

/** A consumer group member's heartbeat or leaving: `{ member, ttlMs? }`. */
export const memberBodySchema = z.strictObject(
  {
    member: z.string().min(1).max(200),
    ttlMs: z
      .number()
      .int()
      .min(SUBSCRIBE_BOUNDS.leaseTtlMs.min)
      .max(SUBSCRIBE_BOUNDS.leaseTtlMs.max)
      .optional(),
  },
  { error: 'must be a JSON object { member, ttlMs? }' },
);

export const selectorBodySchema = z.union(
  [
    z.strictObject({ stream: shortText(200), by: shortText(200).optional() }),
    z.strictObject({ id: shortText(100), by: shortText(200).optional() }),
    z.strictObject({ all: z.literal(true), ...bulkFields }),
    z.strictObject({ error: shortText(1000), ...bulkFields }),
  ],
  {
    error:
      'must be { "stream": "..." }, { "id": "..." }, { "all": true } or { "error": "..." } (the last two with optional limit and after)',
  },
);

/**
 * Required on every request answered by `ok` or `error`, so each reply names its request and an `error`
 * with `sub` but no `req` can only mean that the subscription ended.
 */
const requestIdRule = 'must be a string of at most 100 characters or a number';
const requestId = z.union([z.string().max(100), z.number()], {
  error: `${requestIdRule} (required on this request)`,
});
const pingId = z.union([z.string().max(100), z.number()], { error: requestIdRule });
const subId = shortText(64);
/** Checked in full by the subscription engine, which names the field (`leaseTtlMs`, `info.reason`, ...). */
const engineChecked = z.unknown().optional();

const count = nonNegInt;
/** Seconds: a sum of latencies, at most about 31,700 years. */
const seconds = z.number().min(0).max(1e12);
const histogram = z.strictObject({
  count,
  sum: seconds,
  max: seconds,
  buckets: z.array(count).length(LATENCY_BUCKETS.length),
});

/** A `report` frame's monitors: every field required, every number bounded, about 1 KB in all. */
export const monitorsSchema = z.strictObject({
  ...(Object.fromEntries(Object.keys(MONITOR_COUNTERS).map((k) => [k, count])) as Record<
    keyof typeof MONITOR_COUNTERS,
    typeof count
  >),
  parkedEntities: count,
  handlerSeconds: histogram,
  endToEndSeconds: histogram,
  checkpointLag: z.strictObject({ events: count, seconds }),
});

export const clientMessageSchema = z.discriminatedUnion(
  'type',
  [
    z.strictObject({
      type: z.literal('subscribe'),
      sub: subId,
      consumer: engineChecked,
      filter: engineChecked,
      from: engineChecked,
      standby: engineChecked,
      maxInFlight: engineChecked,
      batchSize: engineChecked,
      leaseTtlMs: engineChecked,
      owner: engineChecked,
      credit: nonNegInt.optional(),
      req: requestId,
    }),
    z.strictObject({ type: z.literal('more'), sub: subId, messages: posInt.max(1_000_000) }),
    z.strictObject({ type: z.literal('outage'), sub: subId, active: z.boolean(), req: requestId }),
    z.strictObject({
      type: z.literal('ack'),
      sub: subId,
      position: engineChecked,
      req: requestId,
    }),
    z.strictObject({
      type: z.literal('park'),
      sub: subId,
      position: engineChecked,
      info: engineChecked,
      req: requestId,
    }),
    z.strictObject({ type: z.literal('fail'), sub: subId, info: engineChecked, req: requestId }),
    z.strictObject({ type: z.literal('unsubscribe'), sub: subId, req: requestId }),
    z.strictObject({ type: z.literal('ping'), req: pingId.optional() }),
    z.strictObject({ type: z.literal('report'), sub: subId, monitors: monitorsSchema }),
  ],
  { error: 'must be one of subscribe, more, ack, park, fail, unsubscribe, ping, report' },
);

// ---- query strings: every value arrives as a string (or an array when repeated) ----

type Query = Record<string, unknown>;

export function checkQueryKeys(query: Query, allowed: readonly string[]): void {
  for (const key of Object.keys(query)) {
    if (!allowed.includes(key))
      throw new InvalidInputError(clip(key), `is not a query parameter here (${allowed.join(', ')})`);
  }
}

/** An integer query parameter `>= min`, or undefined when absent. */
export function intQuery(
  query: Query,
  name: string,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !/^\d{1,16}$/.test(v))
    throw new InvalidInputError(name, `must be an integer >= ${min}`);
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < min) throw new InvalidInputError(name, `must be an integer >= ${min}`);
  if (n > max) throw new InvalidInputError(name, `must be at most ${max}`);
  return n;
}

/** A repeatable string query parameter (`?types=a&types=b`), or undefined when absent. */
export function listQuery(query: Query, name: string): string[] | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  const list = Array.isArray(v) ? (v as unknown[]) : [v];
  return list.map((item, i) => {
    if (typeof item !== 'string' || item.length === 0 || item.length > 256) {
      throw new InvalidInputError(`${name}[${i}]`, 'must be a string of 1-256 characters');
    }
    return item;
  });
}

export function boolQuery(query: Query, name: string): boolean | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0') return false;
  throw new InvalidInputError(name, 'must be true or false');
}
