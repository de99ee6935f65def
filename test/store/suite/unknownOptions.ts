import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventStore } from '../../../src/core/eventStore.js';
import { randomConsumer, randomStream } from '../../support/names.js';
import {
  appendRaw,
  assertNothingSince,
  collect,
  events,
  rejectsWith,
  sharedStore,
  type MakeStore,
} from './context.js';

/** Calls with input only untyped callers (JavaScript, configuration read at run time) can give. */
type Loose = (store: EventStore, consumer: string) => Promise<unknown>;

/** [what, call, field named, closest known key suggested (null: none is near)] */
type OptionCase = [string, Loose, string, string | null];

const raw = (x: unknown): never => x as never;

const cases: OptionCase[] = [
  [
    'append with a misspelt expectedVersion',
    (s) => appendRaw(s, randomStream(), events(1), { expectedVersoin: 5 }),
    'options.expectedVersoin',
    'expectedVersion',
  ],
  [
    'append with an option it does not have',
    (s) => appendRaw(s, randomStream(), events(1), { idempotencyKey: 'k' }),
    'options.idempotencyKey',
    null,
  ],
  ['append with null options', (s) => appendRaw(s, randomStream(), events(1), null), 'options', null],
  [
    'readStream with a misspelt fromVersion',
    (s) => collect(s.readStream(randomStream(), raw({ fromVerison: 2 }))),
    'options.fromVerison',
    'fromVersion',
  ],
  ['readAll with a misspelt after', (s) => collect(s.readAll(raw({ aftre: 1 }))), 'options.aftre', 'after'],
  [
    'readAll with a misspelt filter field',
    (s) => collect(s.readAll({ filter: raw({ typse: ['t'] }) })),
    'filter.typse',
    'types',
  ],
  [
    'subscribe with a misspelt batchSize',
    (s, c) => s.subscribe(c, raw({ bacthSize: 5 })),
    'options.bacthSize',
    'batchSize',
  ],
  [
    'subscribe with a misspelt filter field',
    (s, c) => s.subscribe(c, { filter: raw({ categroies: ['x'] }) }),
    'filter.categroies',
    'categories',
  ],
  [
    'deadLetters.list with a misspelt all',
    (s, c) => s.deadLetters.list(c, raw({ al: true })),
    'options.al',
    'all',
  ],
  [
    'deadLetters.skip with a misspelt by',
    (s, c) => s.deadLetters.skip(c, { stream: 'x' }, raw({ bye: 'me' })),
    'options.bye',
    'by',
  ],
  [
    'deadLetters.retry with a selector key it does not have',
    (s, c) => s.deadLetters.retry(c, raw({ stream: 'x', streem: 'y' })),
    'selector.streem',
    'stream',
  ],
];

export function unknownOptionTests(make: MakeStore): void {
  describe('unknown option keys are refused, named, with the closest known key', () => {
    const shared = sharedStore(make);
    for (const [what, call, field, suggestion] of cases) {
      it(`${what} is invalid_input naming ${field}`, async () => {
        const store = shared();
        // An existing consumer, so that calls which look it up reach their option checks.
        const consumer = randomConsumer();
        await (await store.subscribe(consumer)).close();
        const head = await store.headPosition();
        const err = await rejectsWith(call(store, consumer), 'invalid_input', field);
        if (suggestion !== null) assert.match(err.message, new RegExp(`did you mean ${suggestion}\\?$`));
        else assert.doesNotMatch(err.message, /did you mean/);
        await assertNothingSince(store, head);
      });
    }

    it('subscribe with an unknown option registers no consumer', async () => {
      const store = shared();
      const consumer = randomConsumer();
      await rejectsWith(
        store.subscribe(consumer, raw({ partitons: 4 })),
        'invalid_input',
        'options.partitons',
      );
      assert.ok(!(await store.consumers.list()).some((c) => c.name === consumer));
    });

    it('park with a misspelt info field is refused and parks nothing', async () => {
      const store = shared();
      const stream = randomStream();
      await store.append(stream, events(1));
      const consumer = randomConsumer();
      const sub = await store.subscribe(consumer, { from: (await store.headPosition()) - 1 });
      try {
        const first = await sub[Symbol.asyncIterator]().next();
        assert.ok(!first.done && first.value.kind === 'events');
        const position = first.value.events[0]!.position;
        const err = await rejectsWith(
          sub.park(position, raw({ reason: 'bad', attemps: 2 })),
          'invalid_input',
          'info.attemps',
        );
        assert.match(err.message, /did you mean attempts\?$/);
        assert.deepEqual(await store.deadLetters.list(consumer), []);
      } finally {
        await sub.close();
      }
    });
  });
}
