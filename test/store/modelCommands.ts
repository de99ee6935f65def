// The random commands of the model-based store test (model.test.ts).
import fc from 'fast-check';
import type { NewEvent } from '../../src/core/event.js';
import type { ExpectedVersion } from '../../src/core/expectedVersion.js';
import type { EventFilter } from '../../src/core/filter.js';
import type { JsonObject, JsonValue } from '../../src/core/json.js';

export const STREAMS = ['acct-1', 'acct-2', 'order-1', 'order-10', 'misc'] as const;
export const TYPES = ['created', 'changed', 'closed'] as const;
/** Ids shared between commands, so that duplicates and conflicts are common. */
const POOL = Array.from({ length: 6 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`);

export interface AppendCmd {
  kind: 'append';
  stream: string;
  events: NewEvent[];
  expected: ExpectedVersion | undefined;
  /** Re-send an earlier batch instead (to its stream or this one, maybe with changed data). */
  replay?: { index: number; otherStream: boolean; changeData: boolean };
}

export type Cmd =
  | AppendCmd
  | { kind: 'parallel'; appends: AppendCmd[] }
  | { kind: 'readStream'; stream: string; fromVersion: number | undefined; limit: number | undefined }
  | { kind: 'readAll'; after: number | undefined; limit: number | undefined; filter: EventFilter | undefined }
  | { kind: 'head' }
  | { kind: 'version'; stream: string };

const stream = fc.constantFrom(...STREAMS);

const data: fc.Arbitrary<JsonValue> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ n: fc.integer({ min: 0, max: 3 }) }) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<JsonValue> },
);

const id: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...POOL) },
  { weight: 2, arbitrary: fc.uuid() },
  { weight: 2, arbitrary: fc.constant(undefined) },
);
const metadata: fc.Arbitrary<JsonObject | undefined> = fc.option(
  fc.constantFrom<JsonObject>({ commandId: 'c1' }, { a: [1] }),
  {
    nil: undefined,
  },
);

const event: fc.Arbitrary<NewEvent> = fc
  .record({ id, type: fc.constantFrom(...TYPES), data, meta: metadata })
  .map(({ id: i, type, data: d, meta }) => {
    const e: NewEvent = { type, data: d };
    if (i !== undefined) e.id = i;
    if (meta !== undefined) e.metadata = meta;
    return e;
  });

const expected: fc.Arbitrary<ExpectedVersion | undefined> = fc.oneof(
  fc.constant(undefined),
  fc.constantFrom<ExpectedVersion>('any', 'no_stream', 'stream_exists'),
  fc.integer({ min: 0, max: 5 }),
);

const appendCmd: fc.Arbitrary<AppendCmd> = fc
  .record({
    stream,
    events: fc.array(event, { minLength: 1, maxLength: 3 }),
    expected,
    replay: fc.option(fc.record({ index: fc.nat(), otherStream: fc.boolean(), changeData: fc.boolean() }), {
      nil: undefined,
      freq: 4,
    }),
  })
  .map(({ replay, ...rest }) =>
    replay === undefined ? { kind: 'append', ...rest } : { kind: 'append', ...rest, replay },
  );

const filter: fc.Arbitrary<EventFilter | undefined> = fc.option(
  fc
    .record(
      {
        types: fc.subarray([...TYPES]),
        categories: fc.subarray(['acct', 'order', 'misc', 'nope']),
        streamPrefixes: fc.subarray(['acct-1', 'order-1', 'mi']),
      },
      { requiredKeys: [] },
    )
    .map((f) => f as EventFilter),
  { nil: undefined },
);

const optionalNat = (max: number): fc.Arbitrary<number | undefined> =>
  fc.option(fc.integer({ min: 0, max }), { nil: undefined });
const optionalLimit = fc.option(fc.integer({ min: 1, max: 6 }), { nil: undefined });

export function modelCommands(): fc.Arbitrary<Cmd[]> {
  const cmd: fc.Arbitrary<Cmd> = fc.oneof(
    { weight: 8, arbitrary: appendCmd },
    {
      weight: 2,
      arbitrary: fc
        .array(appendCmd, { minLength: 2, maxLength: 4 })
        .map((appends): Cmd => ({ kind: 'parallel', appends })),
    },
    {
      weight: 2,
      arbitrary: fc
        .record({ stream, fromVersion: optionalNat(6), limit: optionalLimit })
        .map((r): Cmd => ({ kind: 'readStream', ...r })),
    },
    {
      weight: 2,
      arbitrary: fc
        .record({ after: optionalNat(12), limit: optionalLimit, filter })
        .map((r): Cmd => ({ kind: 'readAll', ...r })),
    },
    { weight: 1, arbitrary: fc.constant<Cmd>({ kind: 'head' }) },
    { weight: 1, arbitrary: stream.map((s): Cmd => ({ kind: 'version', stream: s })) },
  );
  return fc.array(cmd, { minLength: 1, maxLength: 30 });
}
