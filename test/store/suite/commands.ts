import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  commandEventId,
  handleCommand,
  rejectCommand,
  type Decider,
  type Rejected,
} from '../../../src/commands/index.js';
import type { NewEvent, RecordedEvent } from '../../../src/core/event.js';
import type { EventStore } from '../../../src/core/eventStore.js';
import { bySpeed } from '../../support/fast.js';
import { randomStream } from '../../support/names.js';
import { collect, rejectsWith, sharedStore, type MakeStore } from './context.js';

/**
 * A shopping cart: how many items, and the last one (a fold in constant time per event, so that
 * long carts fold quickly), with a cap that makes an add refusable.
 */
interface Cart {
  count: number;
  last: string | null;
}
type CartCommand = { add: string } | { addAll: string[] };
type CartRejection = { code: 'cart_full'; size: number };

const MAX_ITEMS = 5000;

function decideCart(command: CartCommand, state: Cart): NewEvent[] | Rejected<CartRejection> {
  const add = 'add' in command ? [command.add] : command.addAll;
  if (state.count + add.length > MAX_ITEMS) return rejectCommand({ code: 'cart_full', size: state.count });
  return add.map((item) => ({ type: 'item.added', data: { item } }));
}

const cart: Decider<Cart, CartCommand, CartRejection> = {
  initialState: { count: 0, last: null },
  evolve: (state, e) =>
    e.type === 'item.added' ? { count: state.count + 1, last: (e.data as { item: string }).item } : state,
  decide: decideCart,
};

/** Resolves once `n` calls have arrived, for every caller: callers that must race wait on it. */
function barrier(n: number): () => Promise<void> {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return () => {
    if (++arrived >= n) open();
    return opened;
  };
}

function items(events: RecordedEvent[]): string[] {
  return events.map((e) => (e.data as { item: string }).item);
}

async function assertContiguous(store: EventStore, stream: string, count: number): Promise<RecordedEvent[]> {
  const all = await collect(store.readStream(stream));
  assert.equal(all.length, count, 'events in the stream');
  all.forEach((e, i) => assert.equal(e.version, i + 1, 'versions are contiguous'));
  return all;
}

export interface CommandSuiteOptions {
  /** Items each of the 16 callers of the contention test adds to one cart. @default 100 */
  cartItems?: number;
}

export function commandTests(make: MakeStore, { cartItems }: CommandSuiteOptions = {}): void {
  describe('handleCommand', () => {
    const shared = sharedStore(make);

    it('folds the stream, appends what decide returns at the version read, and returns the new state', async () => {
      const store = shared();
      const stream = randomStream('cart');
      await store.append(stream, [{ type: 'item.added', data: { item: 'a' } }]);
      const r = await handleCommand(store, stream, cart, { addAll: ['b', 'c'] });
      assert.ok(r.ok);
      assert.deepEqual(r.state, { count: 3, last: 'c' });
      assert.equal(r.version, 3);
      assert.equal(r.duplicate, false);
      assert.equal(r.attempts, 1);
      assert.deepEqual(
        r.events.map((e) => [e.version, e.type]),
        [
          [2, 'item.added'],
          [3, 'item.added'],
        ],
      );
      assert.deepEqual(r.events, (await collect(store.readStream(stream))).slice(1));
    });

    it('returns a rejection as a value and appends nothing', async () => {
      const store = shared();
      const stream = randomStream('cart');
      await store.append(stream, [{ type: 'item.added', data: { item: 'a' } }]);
      const r = await handleCommand(store, stream, cart, {
        addAll: Array.from({ length: MAX_ITEMS }, String),
      });
      assert.deepEqual(r, {
        ok: false,
        reason: 'rejected',
        rejection: { code: 'cart_full', size: 1 },
        state: { count: 1, last: 'a' },
        version: 1,
        attempts: 1,
      });
      assert.equal(await store.streamVersion(stream), 1);
    });

    it('appends nothing when decide returns no events', async () => {
      const store = shared();
      const stream = randomStream('cart');
      const r = await handleCommand(store, stream, cart, { addAll: [] });
      assert.ok(r.ok);
      assert.deepEqual([r.events, r.version, r.state], [[], 0, cart.initialState]);
      assert.equal(await store.streamVersion(stream), 0);
    });

    it('on a version conflict folds the newer events in and decides again', async () => {
      const store = shared();
      const stream = randomStream('cart');
      const seen: Cart[] = [];
      const interfering: Decider<Cart, CartCommand, CartRejection> = {
        ...cart,
        decide: async (command, state) => {
          seen.push(state);
          // Another writer appends between this call's read and its append, once.
          if (seen.length === 1) await store.append(stream, [{ type: 'item.added', data: { item: 'x' } }]);
          return decideCart(command, state);
        },
      };
      const r = await handleCommand(store, stream, interfering, { add: 'a' });
      assert.ok(r.ok);
      assert.deepEqual(seen, [cart.initialState, { count: 1, last: 'x' }]);
      assert.equal(r.attempts, 2);
      assert.deepEqual(r.state, { count: 2, last: 'a' });
      assert.deepEqual(items(await assertContiguous(store, stream, 2)), ['x', 'a']);
    });

    it('returns the conflict once the retries are used up, and appends nothing of its own', async () => {
      const store = shared();
      const stream = randomStream('cart');
      let calls = 0;
      const alwaysBeaten: Decider<Cart, CartCommand, CartRejection> = {
        ...cart,
        decide: async (command, state) => {
          calls++;
          await store.append(stream, [{ type: 'item.added', data: { item: `other-${calls}` } }]);
          return decideCart(command, state);
        },
      };
      const r = await handleCommand(store, stream, alwaysBeaten, { add: 'mine' }, { retries: 2 });
      assert.equal(r.ok, false);
      assert.ok(!r.ok && r.reason === 'conflict');
      assert.equal(r.error.code, 'wrong_expected_version');
      assert.equal(r.error.details.actual, 3);
      assert.equal(r.attempts, 3);
      assert.deepEqual(r.state, { count: 2, last: 'other-2' });
      assert.deepEqual(items(await assertContiguous(store, stream, 3)), ['other-1', 'other-2', 'other-3']);
    });

    it('with a commandId, stamps the events and derives their ids; the same command again appends nothing', async () => {
      const store = shared();
      const stream = randomStream('cart');
      const commandId = randomUUID();
      const first = await handleCommand(store, stream, cart, { addAll: ['a', 'b'] }, { commandId });
      await handleCommand(store, stream, cart, { add: 'c' });
      const again = await handleCommand(store, stream, cart, { addAll: ['a', 'b'] }, { commandId });
      assert.ok(first.ok && again.ok);
      assert.deepEqual(
        first.events.map((e) => e.id),
        [commandEventId(commandId, 0), commandEventId(commandId, 1)],
      );
      for (const e of first.events) assert.equal(e.metadata.commandId, commandId);
      assert.equal(again.duplicate, true);
      assert.deepEqual(again.events, first.events);
      assert.deepEqual(again.state, first.state, 'the first result: the state right after its events');
      assert.equal(again.version, 2);
      assert.deepEqual(items(await assertContiguous(store, stream, 3)), ['a', 'b', 'c']);
    });

    it('each command sent twice by two concurrent callers appends once, and both get its events', async () => {
      const store = shared();
      const stream = randomStream('cart');
      const commands = Array.from({ length: 20 }, (_, i) => ({ id: randomUUID(), item: `item-${i}` }));
      const results = await Promise.all(
        commands.flatMap((c) =>
          [1, 2].map(() =>
            handleCommand(store, stream, cart, { add: c.item }, { commandId: c.id, retries: 1000 }),
          ),
        ),
      );
      for (let i = 0; i < commands.length; i++) {
        const [a, b] = [results[2 * i]!, results[2 * i + 1]!];
        assert.ok(a.ok && b.ok, 'no conflict or rejection reaches a caller');
        assert.deepEqual(b.events, a.events, `both callers of ${commands[i]!.item} get the same events`);
        assert.equal([a.duplicate, b.duplicate].filter(Boolean).length, 1, 'exactly one call appended');
      }
      const all = await assertContiguous(store, stream, commands.length);
      assert.deepEqual(items(all).sort(), commands.map((c) => c.item).sort());
    });

    it('two callers racing with the same command on the same state: the store writes it once', async () => {
      const store = shared();
      const stream = randomStream('cart');
      const commandId = randomUUID();
      const bothDecided = barrier(2);
      const racing = (tag: string): Decider<Cart, CartCommand, CartRejection> => ({
        ...cart,
        decide: async (command, state) => {
          await bothDecided();
          // `tag` makes the two decisions differ: the second append is refused as other content for
          // the same ids, and its caller returns the first one's events.
          return (decideCart(command, state) as NewEvent[]).map((e) => ({
            ...e,
            data: { ...(e.data as object), by: tag },
          }));
        },
      });
      const [a, b] = await Promise.all([
        handleCommand(store, stream, racing('a'), { add: 'x' }, { commandId }),
        handleCommand(store, stream, racing('b'), { add: 'x' }, { commandId }),
      ]);
      assert.ok(a.ok && b.ok);
      assert.deepEqual(a.events, b.events);
      assert.deepEqual(
        [a.duplicate, b.duplicate].sort(),
        [false, true],
        'one caller appended, the other found it',
      );
      assert.equal((await assertContiguous(store, stream, 1))[0]!.id, commandEventId(commandId, 0));
    });

    // 16 x 100 in `npm test`; 16 x 10 in the inner loop (`npm run test:fast`) and for the paging
    // variants of a store, whose every command reads its stream a page of 1 or 3 events at a time.
    const perCaller = cartItems ?? bySpeed(100, 10);
    it(`16 concurrent callers adding ${perCaller} items each to one cart: ${16 * perCaller} items, contiguous versions, no conflict`, async () => {
      const store = shared();
      const stream = randomStream('cart');
      const callers = 16;
      let attempts = 0;
      await Promise.all(
        Array.from({ length: callers }, async (_, c) => {
          for (let i = 0; i < perCaller; i++) {
            const r = await handleCommand(store, stream, cart, { add: `${c}:${i}` }, { retries: 1000 });
            assert.ok(r.ok, `caller ${c} item ${i}: ${JSON.stringify(r)}`);
            attempts += r.attempts;
          }
        }),
      );
      const all = await assertContiguous(store, stream, callers * perCaller);
      const added = items(all);
      assert.equal(new Set(added).size, callers * perCaller, 'every item once');
      for (let c = 0; c < callers; c++) {
        const mine = added.filter((item) => item.startsWith(`${c}:`));
        assert.deepEqual(
          mine,
          Array.from({ length: perCaller }, (_, i) => `${c}:${i}`),
          `caller ${c}'s items in order`,
        );
      }
      console.log(`# 16 x ${perCaller} cart items: ${attempts} attempts for ${callers * perCaller} commands`);
    });

    it('refuses bad options, naming the field', async () => {
      const store = shared();
      const stream = randomStream('cart');
      await rejectsWith(
        handleCommand(store, stream, cart, { add: 'a' }, { retries: -1 }),
        'invalid_input',
        'retries',
      );
      await rejectsWith(
        handleCommand(store, stream, cart, { add: 'a' }, { retries: 1_000_001 }),
        'invalid_input',
        'retries',
      );
      await rejectsWith(
        handleCommand(store, stream, cart, { add: 'a' }, { commandId: '' }),
        'invalid_input',
        'commandId',
      );
      await rejectsWith(
        handleCommand(store, stream, cart, { add: 'a' }, { commandId: 'x'.repeat(257) }),
        'invalid_input',
        'commandId',
      );
      await rejectsWith(handleCommand(store, '', cart, { add: 'a' }), 'invalid_input', 'stream');
      assert.equal(await store.streamVersion(stream), 0);
    });
  });
}
