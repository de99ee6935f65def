import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ErrorCode } from '../../../src/core/errors.js';
import { randomStream } from '../../support/names.js';
import {
  appendRaw,
  assertNothingSince,
  assertUnchanged,
  collect,
  events,
  rejectsWith,
  sharedStore,
  withStore,
  type MakeStore,
} from './context.js';

const MIB = 1024 * 1024;

function cyclic(): unknown {
  const o: Record<string, unknown> = { a: 1 };
  o.self = o;
  return o;
}

/** [what, stream (undefined: a random valid one), events, code, field] */
type BadCase = [string, unknown, unknown, ErrorCode, string];

const ok = { type: 't', data: 1 };

const badCases: BadCase[] = [
  ['an empty stream name', '', [ok], 'invalid_input', 'stream'],
  ['a stream name of 201 characters', 's'.repeat(201), [ok], 'invalid_input', 'stream'],
  ['a stream name with a newline', 'invoice-\n1', [ok], 'invalid_input', 'stream'],
  ['a stream name with a NUL', 'invoice-\u00001', [ok], 'invalid_input', 'stream'],
  ['a stream name with DEL', 'invoice-\u007f', [ok], 'invalid_input', 'stream'],
  ['a stream name with a tab', 'invoice\t1', [ok], 'invalid_input', 'stream'],
  ['a stream name with a lone high surrogate', 'invoice-\ud83d', [ok], 'invalid_input', 'stream'],
  ['a stream name with a lone low surrogate', 'invoice-\ude00x', [ok], 'invalid_input', 'stream'],
  ['a stream name with a C1 control', 'invoice-\u00851', [ok], 'invalid_input', 'stream'],
  ['a stream name with surrounding spaces', ' invoice-1 ', [ok], 'invalid_input', 'stream'],
  ['a stream name that is a number', 42, [ok], 'invalid_input', 'stream'],
  ['no stream name', undefined, [ok], 'invalid_input', 'stream'],
  ['events that are not an array', 'VALID', { type: 't', data: 1 }, 'invalid_input', 'events'],
  ['no events', 'VALID', [], 'invalid_input', 'events'],
  ['5001 events (over the default batch limit)', 'VALID', events(5001), 'invalid_input', 'events'],
  ['an event that is null', 'VALID', [ok, null], 'invalid_input', 'events[1]'],
  ['an event that is an array', 'VALID', [[ok]], 'invalid_input', 'events[0]'],
  ['an event with an unknown field', 'VALID', [{ ...ok, stream: 'x' }], 'invalid_input', 'events[0].stream'],
  ['a missing type', 'VALID', [{ data: 1 }], 'invalid_input', 'events[0].type'],
  ['an empty type', 'VALID', [{ type: '', data: 1 }], 'invalid_input', 'events[0].type'],
  [
    'a type of 257 characters',
    'VALID',
    [{ type: 't'.repeat(257), data: 1 }],
    'invalid_input',
    'events[0].type',
  ],
  ['a type that is not a string', 'VALID', [{ type: 7, data: 1 }], 'invalid_input', 'events[0].type'],
  [
    'a type with a control character',
    'VALID',
    [{ type: 'a\u0007b', data: 1 }],
    'invalid_input',
    'events[0].type',
  ],
  ['a type with a NUL', 'VALID', [{ type: 'a\u0000b', data: 1 }], 'invalid_input', 'events[0].type'],
  [
    'a type with a lone surrogate (it has no UTF-8 form)',
    'VALID',
    [{ type: 'order.\ud83d', data: 1 }],
    'invalid_input',
    'events[0].type',
  ],
  ['missing data', 'VALID', [{ type: 't' }], 'invalid_input', 'events[0].data'],
  ['undefined data', 'VALID', [{ type: 't', data: undefined }], 'invalid_input', 'events[0].data'],
  ['a function as data', 'VALID', [{ type: 't', data: () => 1 }], 'invalid_input', 'events[0].data'],
  [
    'a nested function in data',
    'VALID',
    [{ type: 't', data: { a: { f: () => 1 } } }],
    'invalid_input',
    'events[0].data',
  ],
  ['a cycle in data', 'VALID', [{ type: 't', data: cyclic() }], 'invalid_input', 'events[0].data'],
  ['a BigInt in data', 'VALID', [{ type: 't', data: { n: 10n } }], 'invalid_input', 'events[0].data'],
  [
    'undefined inside data',
    'VALID',
    [{ type: 't', data: { a: undefined } }],
    'invalid_input',
    'events[0].data',
  ],
  [
    'undefined in a data array',
    'VALID',
    [{ type: 't', data: [1, undefined] }],
    'invalid_input',
    'events[0].data',
  ],
  ['NaN in data', 'VALID', [{ type: 't', data: { n: Number.NaN } }], 'invalid_input', 'events[0].data'],
  ['Infinity in data', 'VALID', [{ type: 't', data: [Infinity] }], 'invalid_input', 'events[0].data'],
  ['a symbol in data', 'VALID', [{ type: 't', data: { s: Symbol('x') } }], 'invalid_input', 'events[0].data'],
  ['a Date in data', 'VALID', [{ type: 't', data: { d: new Date(0) } }], 'invalid_input', 'events[0].data'],
  ['a Map as data', 'VALID', [{ type: 't', data: new Map() }], 'invalid_input', 'events[0].data'],
  ['metadata that is an array', 'VALID', [{ ...ok, metadata: [1] }], 'invalid_input', 'events[0].metadata'],
  ['metadata that is a string', 'VALID', [{ ...ok, metadata: 'm' }], 'invalid_input', 'events[0].metadata'],
  [
    'a function in metadata',
    'VALID',
    [{ ...ok, metadata: { f: () => 1 } }],
    'invalid_input',
    'events[0].metadata',
  ],
  ['a BigInt in metadata', 'VALID', [{ ...ok, metadata: { n: 1n } }], 'invalid_input', 'events[0].metadata'],
  ['a malformed id', 'VALID', [{ ...ok, id: 'not-a-uuid' }], 'invalid_input', 'events[0].id'],
  ['an empty id', 'VALID', [{ ...ok, id: '' }], 'invalid_input', 'events[0].id'],
  [
    'an id in braces',
    'VALID',
    [{ ...ok, id: '{6f9619ff-8b86-d011-b42d-00cf4fc964ff}' }],
    'invalid_input',
    'events[0].id',
  ],
  ['a numeric id', 'VALID', [{ ...ok, id: 12345 }], 'invalid_input', 'events[0].id'],
  [
    'an id one character short',
    'VALID',
    [{ ...ok, id: '6f9619ff-8b86-d011-b42d-00cf4fc964f' }],
    'invalid_input',
    'events[0].id',
  ],
  ['an event over 1 MiB', 'VALID', [{ type: 't', data: 'x'.repeat(MIB) }], 'too_large', 'events[0]'],
  [
    'an event whose data and metadata together exceed 1 MiB',
    'VALID',
    [{ type: 't', data: 'x'.repeat(MIB / 2), metadata: { m: 'y'.repeat(MIB / 2) } }],
    'too_large',
    'events[0]',
  ],
  [
    'an event over 1 MiB in UTF-8 bytes but not in characters',
    'VALID',
    [{ type: 't', data: 'é'.repeat(600_000) }],
    'too_large',
    'events[0]',
  ],
  [
    'a bad event after good ones (reported by its index)',
    'VALID',
    [ok, ok, { type: '', data: 1 }],
    'invalid_input',
    'events[2].type',
  ],
];

export function validationTests(make: MakeStore): void {
  describe('bad input is refused, named, and writes nothing', () => {
    it('all the cases below leave a store with prior events unchanged', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        await store.append(stream, events(2));
        for (const [what, s, evs, code, field] of badCases) {
          const target = s === 'VALID' ? stream : s;
          try {
            await rejectsWith(appendRaw(store, target, evs), code, field);
          } catch (err) {
            assert.fail(`${what}: ${(err as Error).message}`);
          }
        }
        await assertUnchanged(store, 2, stream, 2);
      }));

    describe('each case', () => {
      const shared = sharedStore(make);
      for (const [what, s, evs, code, field] of badCases) {
        it(`${what} is ${code} naming ${field}`, async () => {
          const store = shared();
          const head = await store.headPosition();
          const stream = s === 'VALID' ? randomStream() : s;
          await rejectsWith(appendRaw(store, stream, evs), code, field);
          await assertNothingSince(
            store,
            head,
            typeof stream === 'string' && s === 'VALID' ? stream : undefined,
          );
        });
      }
    });

    it('an event of exactly 1 MiB of data and metadata JSON is accepted', () =>
      withStore(make, async (store) => {
        // JSON of the data string: its characters plus two quotes; metadata `{}`: two bytes.
        const data = 'x'.repeat(MIB - 4);
        const r = await store.append(randomStream(), [{ type: 't', data }]);
        assert.equal(r.version, 1);
        const [e] = await collect(store.readAll());
        assert.equal((e?.data as string).length, MIB - 4);
      }));

    it('the size and batch limits are configurable per store', () =>
      withStore(
        make,
        async (store) => {
          const stream = randomStream();
          await store.append(stream, events(3));
          await rejectsWith(store.append(stream, events(4)), 'invalid_input', 'events');
          await store.append(stream, [{ type: 't', data: 'x'.repeat(96) }]); // 98 + 2 bytes
          await rejectsWith(
            store.append(stream, [{ type: 't', data: 'x'.repeat(97) }]),
            'too_large',
            'events[0]',
          );
          await assertUnchanged(store, 4, stream, 4);
        },
        { limits: { maxEventBytes: 100, maxAppendEvents: 3 } },
      ));

    it('a rejected append in the middle of a sequence leaves versions contiguous', () =>
      withStore(make, async (store) => {
        const stream = randomStream();
        await store.append(stream, events(2));
        await rejectsWith(
          appendRaw(store, stream, [ok, { type: 't', data: () => 1 }]),
          'invalid_input',
          'events[1].data',
        );
        await rejectsWith(store.append(stream, events(1), { expectedVersion: 5 }), 'wrong_expected_version');
        const r = await store.append(stream, events(1));
        assert.deepEqual([r.version, r.firstPosition], [3, 3]);
      }));
  });
}
