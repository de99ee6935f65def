/**
 * fast-check arbitraries of HTTP requests that must be refused: each carries at least one defect that
 * makes it invalid (bad JSON, wrong types, huge strings, odd unicode, unknown fields, negative numbers),
 * plus random noise elsewhere. Reads may be valid: they cannot write.
 */
import fc from 'fast-check';

export interface FuzzRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  payload?: string;
}

/** The consumer that exists in the fuzzed store; requests to it must still be refused. */
export const FUZZ_CONSUMER = 'fuzz_v1';

const oddChars = [
  '\u0000',
  '\u0007',
  '\n',
  '\u007f',
  '\u0085',
  '\u200b',
  '\u202e',
  '\ufeff',
  '\ud800',
  '\udfff',
  '💥',
  'é',
  '𝕏',
  '\\',
  '"',
  '/',
  '%',
  '?',
  '#',
  '&',
  '=',
];

export const oddString: fc.Arbitrary<string> = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.array(fc.constantFrom(...oddChars), { minLength: 1, maxLength: 8 }).map((a) => a.join('')),
  fc.integer({ min: 257, max: 100_000 }).map((n) => 'x'.repeat(n)),
);

const badNumber = fc.oneof(
  fc.integer({ min: -1_000_000, max: -1 }),
  fc.double({ min: -1e6, max: 1e6, noInteger: true, noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(1e300, -1e300, 2 ** 53, 1.5, -0.5),
);

/** JSON-able values of the wrong kind for a field that wants something specific. */
const junk = fc.oneof(
  oddString,
  badNumber,
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 3 }),
);

// Control characters (C0, DEL, C1), which names and types may not contain.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

const validType = fc.string({ minLength: 1, maxLength: 20 }).filter((s) => !CONTROL.test(s));
const goodEvent = fc.record({ type: validType, data: fc.jsonValue({ maxDepth: 3 }) });

/** An event with at least one defect. */
const badEvent: fc.Arbitrary<unknown> = fc.oneof(
  junk.filter((v) => v === null || typeof v !== 'object' || Array.isArray(v)),
  fc.record({
    type: junk.filter((t) => typeof t !== 'string' || t.length === 0 || t.length > 256 || CONTROL.test(t)),
    data: fc.jsonValue(),
  }),
  fc.record({ type: validType }), // no data
  fc.record({
    type: validType,
    data: fc.jsonValue(),
    metadata: junk.filter((m) => m !== null && (typeof m !== 'object' || Array.isArray(m))),
  }), // null metadata means none: valid
  fc.record({
    id: oddString.filter((s) => !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(s)),
    type: validType,
    data: fc.jsonValue(),
  }),
  fc
    .tuple(
      goodEvent,
      oddString.filter((k) => !['id', 'type', 'data', 'metadata', '__proto__'].includes(k)),
      junk,
    )
    .map(([e, k, v]) => ({ ...e, [k]: v })),
  fc.record({ type: validType, data: fc.integer({ min: 513, max: 3000 }).map((d) => nest(d)) }),
);

function nest(depth: number): unknown {
  let v: unknown = 0;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

const badExpectedVersion = fc.oneof(
  badNumber,
  oddString.filter((s) => !['any', 'no_stream', 'stream_exists'].includes(s)),
  fc.boolean(),
  fc.constant(null),
  fc.constant({}),
);

/** A JSON append body with at least one defect. */
const badAppendBody: fc.Arbitrary<unknown> = fc.oneof(
  fc
    .record({ events: fc.array(goodEvent, { maxLength: 3 }), [`x`]: junk })
    .map(({ events, x }) => ({ events, x })),
  fc.record({ events: junk.filter((e) => !Array.isArray(e)) }),
  fc.constant({ events: [] }),
  fc
    .tuple(fc.array(goodEvent, { maxLength: 3 }), badEvent, fc.array(goodEvent, { maxLength: 3 }))
    .map(([a, bad, b]) => ({ events: [...a, bad, ...b] })),
  fc.record({
    events: fc.array(goodEvent, { minLength: 1, maxLength: 3 }),
    expectedVersion: badExpectedVersion,
  }),
  junk.filter((b) => b === null || typeof b !== 'object' || Array.isArray(b)),
  fc
    .dictionary(
      oddString.filter((k) => k !== 'events'),
      junk,
      { maxKeys: 4 },
    )
    .filter((d) => !('events' in d)),
);

/** Text that is not JSON, or not the JSON an append needs. */
const badJsonText = fc.oneof(
  fc.string().filter((s) => !s.includes('events')),
  fc
    .string({ unit: 'binary' })
    .filter((s) => !s.includes('events'))
    .map((s) => `{${s}`),
  fc.constantFrom(
    '{',
    '[',
    '{"events":',
    '{"events":[{"type":"a","data":}]}',
    'null',
    '{"events":[{]}',
    '\u0000',
    '{"__proto__":{"x":1}}',
    '{"constructor":{"prototype":{}}}',
  ),
  fc.integer({ min: 1000, max: 200_000 }).map((n) => '['.repeat(n)),
);

function encodeSegment(s: string): string {
  try {
    return encodeURIComponent(s);
  } catch {
    return s.replace(/[^A-Za-z0-9]/g, '_'); // a lone surrogate cannot be percent-encoded
  }
}

const stream = fc.oneof(fc.constantFrom('invoice-1', 'fuzz-2', 'a'), oddString).map(encodeSegment);
const consumerName = fc
  .oneof(fc.constant(FUZZ_CONSUMER), fc.constant('absent_v1'), oddString)
  .map(encodeSegment);
const contentType = fc.oneof(
  { weight: 6, arbitrary: fc.constant('application/json') },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'text/plain',
      'application/xml',
      'application/x-www-form-urlencoded',
      'application/json; charset=latin1',
      'multipart/form-data; boundary=x',
      '',
    ),
  },
);

const query = fc
  .array(
    fc.tuple(
      fc.oneof(
        fc.constantFrom('after', 'limit', 'fromVersion', 'types', 'categories', 'streamPrefixes', 'all'),
        oddString,
      ),
      fc.oneof(badNumber.map(String), oddString, fc.nat().map(String)),
    ),
    { maxLength: 4 },
  )
  .map((pairs) =>
    pairs.length === 0
      ? ''
      : `?${pairs.map(([k, v]) => `${encodeSegment(k)}=${encodeSegment(v)}`).join('&')}`,
  );

const jsonOrText = (body: fc.Arbitrary<unknown>) =>
  fc.oneof(
    { weight: 3, arbitrary: body.map((b) => JSON.stringify(b) ?? 'null') },
    { weight: 1, arbitrary: badJsonText },
  );

const badReset = fc.oneof(
  fc.record({ position: fc.oneof(badNumber, oddString, fc.constant(null)) }),
  fc.record({ position: fc.nat(), extra: junk }),
  fc.constant({}),
  junk,
);
const badSelector = fc.oneof(
  fc.record({ stream: fc.constant('invoice-1'), id: fc.constant('x') }),
  fc.record({
    stream: fc.oneof(
      badNumber,
      fc.constant(''),
      fc.integer({ min: 201, max: 5000 }).map((n) => 's'.repeat(n)),
    ),
  }),
  fc.dictionary(
    oddString.filter((k) => k !== 'stream' && k !== 'id' && k !== 'by'),
    junk,
    { minKeys: 1, maxKeys: 3 },
  ),
  junk,
);

export const malformedRequest: fc.Arbitrary<FuzzRequest> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc
      .tuple(stream, contentType, jsonOrText(badAppendBody))
      .map(([s, ct, payload]) => post(`/v1/streams/${s}/events`, ct, payload)),
  },
  { weight: 2, arbitrary: fc.tuple(stream, query).map(([s, q]) => get(`/v1/streams/${s}/events${q}`)) },
  { weight: 2, arbitrary: query.map((q) => get(`/v1/events${q}`)) },
  { weight: 1, arbitrary: fc.tuple(consumerName, query).map(([c, q]) => get(`/v1/consumers/${c}${q}`)) },
  {
    weight: 1,
    arbitrary: fc.tuple(consumerName, query).map(([c, q]) => get(`/v1/consumers/${c}/dead-letters${q}`)),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(consumerName, contentType, jsonOrText(badReset))
      .map(([c, ct, p]) => post(`/v1/consumers/${c}/reset`, ct, p)),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(consumerName, fc.constantFrom('retry', 'skip'), contentType, jsonOrText(badSelector))
      .map(([c, a, ct, p]) => post(`/v1/consumers/${c}/dead-letters/${a}`, ct, p)),
  },
  {
    weight: 1,
    arbitrary: oddString
      .filter((c) => c !== FUZZ_CONSUMER)
      .map((c) => ({ method: 'DELETE', url: `/v1/consumers/${encodeSegment(c)}x`, headers: {} })),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.constantFrom('PUT', 'PATCH', 'OPTIONS', 'DELETE', 'POST'),
        fc.array(oddString.map(encodeSegment), { maxLength: 3 }),
        badJsonText,
      )
      .map(([method, segs, payload]) => ({
        method,
        url: `/v1/${segs.join('/')}x`,
        headers: { 'content-type': 'application/json' },
        payload,
      })),
  },
);

function post(url: string, ct: string, payload: string): FuzzRequest {
  return { method: 'POST', url, headers: ct === '' ? {} : { 'content-type': ct }, payload };
}

function get(url: string): FuzzRequest {
  return { method: 'GET', url, headers: {} };
}
