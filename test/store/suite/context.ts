import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import type { AppendOptions, EventStore } from '../../../src/core/eventStore.js';
import type { ErrorCode } from '../../../src/core/errors.js';
import type { NewEvent, RecordedEvent } from '../../../src/core/event.js';
import type { StoreLimits } from '../../../src/core/limits.js';
import type { Upcasters } from '../../../src/core/upcasters.js';

/** A store made for one test, and how to dispose of it. */
export interface StoreFixture {
  store: EventStore;
  /** Closes the store and removes its data (file, schema, server). */
  cleanup(): Promise<void>;
}

export interface MakeStoreOptions {
  /** Input limits the store must be opened with; unset fields keep the defaults. */
  limits?: Partial<StoreLimits>;
  /** Upcasters the store (for the remote client: the client) must apply on read. */
  upcasters?: Upcasters;
}

/** Makes a new, empty store. Called once per test. */
export type MakeStore = (options?: MakeStoreOptions) => Promise<StoreFixture>;

/** Runs `fn` with a new store and cleans it up afterwards, pass or fail. */
export async function withStore<T>(
  make: MakeStore,
  fn: (store: EventStore) => Promise<T>,
  options?: MakeStoreOptions,
): Promise<T> {
  const fixture = await make(options);
  try {
    return await fn(fixture.store);
  } finally {
    await fixture.cleanup();
  }
}

/**
 * One store for every test of the enclosing `describe` (opened in `before`, cleaned up in `after`),
 * for table-driven cases that each use their own stream. Returns a getter for the store.
 */
export function sharedStore(make: MakeStore, options?: MakeStoreOptions): () => EventStore {
  let fixture: StoreFixture | undefined;
  before(async () => {
    fixture = await make(options);
  });
  after(async () => {
    await fixture?.cleanup();
  });
  return () => {
    assert.ok(fixture, 'the shared store is not open');
    return fixture.store;
  };
}

/** Asserts that nothing was appended since the head was `head`, and that `stream` is at `version`. */
export async function assertNothingSince(
  store: EventStore,
  head: number,
  stream?: string,
  version = 0,
): Promise<void> {
  assert.equal(await store.headPosition(), head, 'head position unchanged');
  assert.deepEqual(await collect(store.readAll({ after: head })), [], 'no event after the head');
  if (stream !== undefined) assert.equal(await store.streamVersion(stream), version, `version of ${stream}`);
}

/** Everything an async iterable yields, in order. */
export async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

/** Calls `append` with input the types would refuse, as untyped callers (JS, HTTP) can. */
export function appendRaw(
  store: EventStore,
  stream: unknown,
  events: unknown,
  options?: unknown,
): Promise<unknown> {
  return store.append(stream as string, events as NewEvent[], options as AppendOptions);
}

/** `n` small events of `type`, with `data` `{ i }` (i from `start`). */
export function events(n: number, type = 'thing.happened', start = 0): NewEvent[] {
  return Array.from({ length: n }, (_, k) => ({ type, data: { i: start + k } }));
}

interface CodedError {
  code: string;
  message: string;
  details?: Record<string, unknown>;
}

function isCoded(err: unknown): err is CodedError {
  return typeof err === 'object' && err !== null && typeof (err as { code?: unknown }).code === 'string';
}

/**
 * Asserts that `promise` rejects with an error of `code`, and (when given) that `details.field` is
 * `field`. Checks the code, not the class, so that remote stores with their own error classes pass too.
 * Returns the error for further checks.
 */
export async function rejectsWith(
  promise: Promise<unknown>,
  code: ErrorCode,
  field?: string,
): Promise<CodedError & { details: Record<string, unknown> }> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  assert.ok(caught !== undefined, `expected a ${code} error, but the call succeeded`);
  assert.ok(
    isCoded(caught),
    `expected an error with a code, got ${caught instanceof Error ? caught.stack : JSON.stringify(caught)}`,
  );
  assert.equal(caught.code, code, `expected code ${code}, got ${caught.code}: ${caught.message}`);
  const details = caught.details ?? {};
  if (field !== undefined) {
    assert.equal(details.field, field, `expected field ${field} in: ${caught.message}`);
    assert.ok(
      caught.message.includes(field),
      `the message should name the field ${field}: ${caught.message}`,
    );
  }
  return { code: caught.code, message: caught.message, details };
}

/** Asserts the store holds exactly `count` events in total and `stream` is at `version`. */
export async function assertUnchanged(
  store: EventStore,
  count: number,
  stream?: string,
  version = 0,
): Promise<void> {
  assert.equal(await store.headPosition(), count, 'head position');
  assert.equal((await collect(store.readAll())).length, count, 'events in readAll');
  if (stream !== undefined) {
    assert.equal(await store.streamVersion(stream), version, `version of ${stream}`);
  }
}

export const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
export const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** Strips what differs between two stores from an event, for comparing content. */
export function shape(e: RecordedEvent): Omit<RecordedEvent, 'recordedAt'> {
  const { recordedAt: _r, ...rest } = e;
  return rest;
}
