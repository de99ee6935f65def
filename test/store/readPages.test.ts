import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RecordedEvent } from '../../src/core/event.js';
import { readPages, tablePage, type PagedReadPlan } from '../../src/core/readPages.js';

function event(position: number): RecordedEvent {
  return {
    id: `00000000-0000-4000-8000-${String(position).padStart(12, '0')}`,
    stream: 's-1',
    type: 't',
    version: position,
    position,
    data: null,
    metadata: {},
    recordedAt: '2026-01-01T00:00:00.000Z',
  };
}

/** A log of `total` events read in pages, each fetch recorded; `gate` holds fetches until opened. */
function log(total: number, pageSize: number, limit?: number) {
  const fetches: [from: number, size: number][] = [];
  let open: (() => void) | null = null;
  let gate: Promise<void> | null = null;
  const plan = (): PagedReadPlan => ({
    from: 0,
    limit,
    pageSize,
    fetchPage: async (from, size) => {
      fetches.push([from, size]);
      if (gate !== null) await gate;
      const events = [];
      for (let p = from + 1; p <= Math.min(total, from + size); p++) events.push(event(p));
      return tablePage(events, size, (last) => last.position);
    },
  });
  return {
    fetches,
    plan,
    hold(): void {
      gate = new Promise((resolve) => (open = resolve));
    },
    release(): void {
      gate = null;
      open?.();
    },
  };
}

async function positions(read: AsyncIterable<RecordedEvent>): Promise<number[]> {
  const out: number[] = [];
  for await (const e of read) out.push(e.position);
  return out;
}

describe('readPages', () => {
  it('reads every page in order, and stops at a short page without another fetch', async () => {
    const l = log(7, 3);
    assert.deepEqual(await positions(readPages(l.plan)), [1, 2, 3, 4, 5, 6, 7]);
    assert.deepEqual(l.fetches, [
      [0, 3],
      [3, 3],
      [6, 3],
    ]);
  });

  it('asks for no more than the limit, and fetches nothing past it', async () => {
    const l = log(100, 4, 8);
    assert.deepEqual(await positions(readPages(l.plan)), [1, 2, 3, 4, 5, 6, 7, 8]);
    assert.deepEqual(l.fetches, [
      [0, 4],
      [4, 4],
    ]);
    const short = log(100, 4, 6);
    assert.deepEqual(await positions(readPages(short.plan)), [1, 2, 3, 4, 5, 6]);
    assert.deepEqual(short.fetches, [
      [0, 4],
      [4, 2],
    ]);
  });

  it('runs its plan at the first next(), and a plan that throws ends the read', async () => {
    let planned = 0;
    const read = readPages(() => {
      planned++;
      throw new Error('bad option');
    });
    assert.equal(planned, 0, 'nothing runs before the read is iterated');
    await assert.rejects(read.next(), /bad option/);
    assert.deepEqual(await read.next(), { value: undefined, done: true });
    assert.equal(planned, 1);
  });

  it('answers calls made while a page is being fetched in order, across pages', async () => {
    const l = log(5, 2);
    l.hold();
    const read = readPages(l.plan);
    const answers = Array.from({ length: 7 }, () => read.next());
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(l.fetches.length, 1, 'one fetch at a time');
    l.release();
    const settled = await Promise.all(answers);
    assert.deepEqual(
      settled.map((r) => (r.done ? 'done' : r.value.position)),
      [1, 2, 3, 4, 5, 'done', 'done'],
    );
    assert.deepEqual(l.fetches, [
      [0, 2],
      [2, 2],
      [4, 2],
    ]);
  });

  it('return() while a fetch is out answers after it, then the read is done and fetches nothing more', async () => {
    const l = log(10, 2);
    const read = readPages(l.plan);
    assert.equal((await read.next()).value?.position, 1);
    assert.equal((await read.next()).value?.position, 2);
    l.hold();
    const third = read.next();
    const ended = read.return(undefined);
    l.release();
    assert.equal((await third).value?.position, 3);
    assert.deepEqual(await ended, { value: undefined, done: true });
    assert.deepEqual(await read.next(), { value: undefined, done: true });
    assert.equal(l.fetches.length, 2);
  });

  it('a failed fetch rejects that call, and the read is done after it', async () => {
    let calls = 0;
    const read = readPages(() => ({
      from: 0,
      limit: undefined,
      pageSize: 2,
      fetchPage: (from, size) => {
        calls++;
        if (from > 0) return Promise.reject(new Error('connection lost'));
        return tablePage([event(1), event(2)], size, (last) => last.position);
      },
    }));
    assert.deepEqual([(await read.next()).value?.position, (await read.next()).value?.position], [1, 2]);
    await assert.rejects(read.next(), /connection lost/);
    assert.deepEqual(await read.next(), { value: undefined, done: true });
    assert.equal(calls, 2);
  });

  it('throw() ends the read and rejects with the error given', async () => {
    const l = log(10, 5);
    const read = readPages(l.plan);
    assert.equal((await read.next()).value?.position, 1);
    const err = new Error('stop');
    await assert.rejects(read.throw(err), (e) => e === err);
    assert.deepEqual(await read.next(), { value: undefined, done: true });
  });

  it('is an async iterator as a generator is, and breaking out of for await ends it', async () => {
    const l = log(10, 3);
    const read = readPages(l.plan);
    const asyncIteratorPrototype = Object.getPrototypeOf(
      Object.getPrototypeOf(async function* () {}.prototype),
    ) as object;
    assert.equal(Object.getPrototypeOf(Object.getPrototypeOf(read)), asyncIteratorPrototype);
    assert.equal(read[Symbol.asyncIterator](), read);
    const seen: number[] = [];
    for await (const e of read) {
      seen.push(e.position);
      if (seen.length === 4) break;
    }
    assert.deepEqual(seen, [1, 2, 3, 4]);
    assert.deepEqual(await read.next(), { value: undefined, done: true });
    assert.equal(l.fetches.length, 2);
  });
});
