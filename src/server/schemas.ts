/**
 * Request schemas (zod) for the HTTP bodies, query strings and WebSocket messages. A failure becomes
 * `InvalidInputError` naming the first offending field; the store then applies its own full checks.
 */
import { z } from 'zod';
import { InvalidInputError } from '../core/errors.js';
import { MAX_CONSUMER_NAME_LENGTH } from '../core/limits.js';

/** Formats a zod issue path like `events[2].type`. */
function fieldPath(root: string, path: readonly PropertyKey[]): string {
  let out = root;
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out.length === 0 ? String(part) : `.${String(part)}`;
  }
  return out.length === 0 ? 'body' : out;
}

export function parseWith<T>(schema: z.ZodType<T>, value: unknown, root: string): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  if (issue.code === 'unrecognized_keys') {
    throw new InvalidInputError(fieldPath(root, [...issue.path, issue.keys[0] ?? '?']), 'is not a known field');
  }
  throw new InvalidInputError(fieldPath(root, issue.path), issue.message);
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

const filterSchema = z.strictObject({
  types: z.array(shortText(256)).max(1000).optional(),
  categories: z.array(shortText(256)).max(1000).optional(),
  streamPrefixes: z.array(shortText(256)).max(1000).optional(),
});

export const resetBodySchema = z.strictObject(
  { position: nonNegInt },
  { error: 'must be a JSON object { position }' },
);

export const selectorBodySchema = z.union(
  [
    z.strictObject({ stream: shortText(200), by: shortText(200).optional() }),
    z.strictObject({ id: shortText(100), by: shortText(200).optional() }),
  ],
  { error: 'must be { "stream": "..." } or { "id": "..." }' },
);

const errorInfo = z.strictObject({
  name: z.string().max(1000).optional(),
  message: z.string().max(100_000),
  stack: z.string().max(100_000).optional(),
});

const requestId = z.union([z.string().max(100), z.number()]);
const subId = shortText(64);

export const clientMessageSchema = z.discriminatedUnion(
  'type',
  [
    z.strictObject({
      type: z.literal('subscribe'),
      sub: subId,
      consumer: shortText(MAX_CONSUMER_NAME_LENGTH),
      filter: filterSchema.optional(),
      from: z.union([z.enum(['start', 'end']), nonNegInt]).optional(),
      standby: z.boolean().optional(),
      maxInFlight: posInt.max(100_000).optional(),
      batchSize: posInt.max(10_000).optional(),
      leaseTtlMs: z.number().int().min(1000).max(600_000).optional(),
      owner: shortText(200).optional(),
      req: requestId.optional(),
    }),
    z.strictObject({ type: z.literal('ack'), sub: subId, position: nonNegInt, req: requestId.optional() }),
    z.strictObject({
      type: z.literal('park'),
      sub: subId,
      position: nonNegInt,
      reason: shortText(10_000),
      error: errorInfo.optional(),
      attempts: posInt.optional(),
      req: requestId.optional(),
    }),
    z.strictObject({
      type: z.literal('fail'),
      sub: subId,
      error: errorInfo,
      event: z
        .object({
          id: z.string(),
          stream: z.string(),
          version: nonNegInt,
          position: nonNegInt,
          type: z.string(),
        })
        .optional(),
      req: requestId.optional(),
    }),
    z.strictObject({ type: z.literal('unsubscribe'), sub: subId, req: requestId.optional() }),
    z.strictObject({ type: z.literal('ping'), req: requestId.optional() }),
  ],
  { error: 'must be one of subscribe, ack, park, fail, unsubscribe, ping' },
);

// ---- query strings: every value arrives as a string (or an array when repeated) ----

type Query = Record<string, unknown>;

export function checkQueryKeys(query: Query, allowed: readonly string[]): void {
  for (const key of Object.keys(query)) {
    if (!allowed.includes(key)) throw new InvalidInputError(key, `is not a query parameter here (${allowed.join(', ')})`);
  }
}

/** An integer query parameter `>= min`, or undefined when absent. */
export function intQuery(query: Query, name: string, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !/^\d{1,16}$/.test(v)) throw new InvalidInputError(name, `must be an integer >= ${min}`);
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
