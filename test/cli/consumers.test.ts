import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ConsumerInfo, DeadLetter, RecordedEvent, Subscription } from '../../src/core/index.js';
import { openSqliteStore, type SqliteEventStore } from '../../src/sqlite/index.js';
import { randomCategory, randomConsumer, tempDir, type TempDir } from '../support/index.js';
import { idem, json } from './cli.js';

/** Takes the first batch of events from a subscription, leaving it open (a `break` out of `for await` would close it). */
async function firstBatch(sub: Subscription): Promise<RecordedEvent[]> {
  const iterator = sub[Symbol.asyncIterator]();
  for (;;) {
    const next = await iterator.next();
    if (next.done) throw new Error('subscription ended before delivering events');
    if (next.value.kind === 'events') return next.value.events;
  }
}

describe('idem consumers, consumer and dlq on a store with a consumer', () => {
  let dir: TempDir;
  let db: string;
  let store: SqliteEventStore;
  let consumer: string;
  let cat: string;
  let events: RecordedEvent[];

  before(async () => {
    dir = tempDir();
    db = dir.file('idem.db');
    store = await openSqliteStore({ path: db });
    cat = randomCategory('inv');
    await store.append(`${cat}-a`, [{ type: 'invoice.issued', data: { n: 1 } }]);
    await store.append(`${cat}-b`, [{ type: 'invoice.issued', data: { n: 2 } }]);
    await store.append(`${cat}-c`, [{ type: 'invoice.issued', data: { n: 3 } }]);
    consumer = randomConsumer('billing');
    const sub = await store.subscribe(consumer, { filter: { categories: [cat] }, from: 'start' });
    try {
      events = await firstBatch(sub);
      assert.equal(events.length, 3);
      // The handler "failed" on a and b: dead-letter them, handle c.
      await sub.park(events[0]!.position, {
        reason: 'handler failed',
        error: { name: 'Error', message: 'handler exploded' },
        attempts: 3,
      });
      await sub.park(events[1]!.position, { reason: 'handler failed', error: { message: 'also exploded' } });
      await sub.ack(events[2]!.position);
    } finally {
      await sub.close();
    }
  });

  after(async () => {
    await store?.close();
    await dir.cleanup();
  });

  it('consumers lists it with cursor, lag and status; --json matches the store', async () => {
    const [human, machine] = await Promise.all([
      idem(['consumers', '--db', db]),
      idem(['consumers', '--db', db, '--json']),
    ]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^NAME\s+STATUS\s+POSITION\s+HEAD\s+LAG/);
    assert.match(human.stdout, new RegExp(`\\n${consumer}\\s+stopped\\s+${events[2]!.position}\\s`));
    assert.equal(machine.code, 0, machine.stderr);
    const list = json<ConsumerInfo[]>(machine);
    const mine = list.find((c) => c.name === consumer);
    assert.ok(mine, 'the consumer is listed');
    assert.equal(mine.position, events[2]!.position);
    assert.deepEqual(mine.filter, { categories: [cat] });
    assert.equal(mine.parked, 2);
  });

  it('consumer show prints one consumer; an unknown name exits 1 with not_found', async () => {
    const [human, machine, missing] = await Promise.all([
      idem(['consumer', 'show', consumer, '--db', db]),
      idem(['consumer', 'show', consumer, '--db', db, '--json']),
      idem(['consumer', 'show', 'nobody_v1', '--db', db]),
    ]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, new RegExp(`^consumer\\s+${consumer}\\n`));
    assert.match(human.stdout, /\nparked\s+2\n/);
    assert.match(human.stdout, new RegExp(`\\nfilter\\s+categories=${cat}\\n`));
    const info = json<ConsumerInfo>(machine);
    assert.equal(info.name, consumer);
    assert.equal(info.status, 'stopped');
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^idem: not_found: /m);
  });

  it('dlq list shows the dead letters with their error; --json matches the store', async () => {
    const [human, machine] = await Promise.all([
      idem(['dlq', 'list', consumer, '--db', db]),
      idem(['dlq', 'list', consumer, '--db', db, '--json']),
    ]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /handler failed: handler exploded/);
    assert.match(human.stdout, new RegExp(`${cat}-b@1`));
    const list = json<DeadLetter[]>(machine);
    assert.deepEqual(list, await store.deadLetters.list(consumer));
    assert.deepEqual(
      list.map((d) => d.event.id),
      [events[0]!.id, events[1]!.id],
    );
    assert.equal(list[0]!.attempts, 3);
  });

  it('dlq retry and skip need exactly one of --stream and --id (exit 2), then act on one entity', async () => {
    const [neither, both] = await Promise.all([
      idem(['dlq', 'retry', consumer, '--db', db]),
      idem(['dlq', 'skip', consumer, '--stream', 'x', '--id', events[0]!.id, '--db', db]),
    ]);
    assert.equal(neither.code, 2);
    assert.match(neither.stderr, /^idem: usage: give exactly one of --stream and --id/m);
    assert.equal(both.code, 2);

    const retried = await idem(['dlq', 'retry', consumer, '--stream', `${cat}-a`, '--db', db, '--json']);
    assert.equal(retried.code, 0, retried.stderr);
    assert.deepEqual(json(retried), { consumer, stream: `${cat}-a`, retried: 1 });
    const skipped = await idem([
      'dlq',
      'skip',
      consumer,
      '--id',
      events[1]!.id,
      '--by',
      'tester',
      '--db',
      db,
    ]);
    assert.equal(skipped.code, 0, skipped.stderr);
    assert.match(
      skipped.stdout,
      new RegExp(`^skipped 1 dead letter of the entity of event ${events[1]!.id} for ${consumer}`),
    );

    const all = json<DeadLetter[]>(await idem(['dlq', 'list', consumer, '--all', '--db', db, '--json']));
    const b = all.find((d) => d.event.id === events[1]!.id);
    assert.equal(b?.status, 'skipped');
    assert.equal(b?.skippedBy, 'tester');
    const a = all.find((d) => d.event.id === events[0]!.id);
    assert.equal(a?.status, 'retrying');
  });

  it('reset and delete are refused with exit 3 (consumer_busy) while a subscriber owns the consumer', async () => {
    const sub = await store.subscribe(consumer, { filter: { categories: [cat] } });
    try {
      const [reset, del, json3] = await Promise.all([
        idem(['consumer', 'reset', consumer, '--to', '0', '--db', db]),
        idem(['consumer', 'delete', consumer, '--db', db]),
        idem(['consumer', 'reset', consumer, '--to', '0', '--db', db, '--json']),
      ]);
      assert.equal(reset.code, 3);
      assert.match(reset.stderr, /^idem: consumer_busy: /m);
      assert.equal(del.code, 3);
      assert.equal(json<{ error: { code: string } }>(json3).error.code, 'consumer_busy');
    } finally {
      await sub.close();
    }
  });

  it('consumer pause and resume: stored, shown as paused by consumers and show; unknown exits 1', async () => {
    const paused = await idem(['consumer', 'pause', consumer, '--by', 'cli test', '--db', db]);
    assert.equal(paused.code, 0, paused.stderr);
    assert.match(paused.stdout, new RegExp(`^consumer ${consumer} paused at position \\d+`));
    assert.equal((await store.consumers.get(consumer)).status, 'paused');
    const [list, show, missing, help] = await Promise.all([
      idem(['consumers', '--db', db]),
      idem(['consumer', 'show', consumer, '--db', db]),
      idem(['consumer', 'pause', 'nobody_v1', '--db', db]),
      idem(['consumer', 'pause', '--help']),
    ]);
    assert.match(list.stdout, new RegExp(`^${consumer}\\s+paused\\s`, 'm'));
    assert.match(show.stdout, /^paused {5}operator since .* by cli test$/m);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^idem: not_found: /m);
    assert.match(help.stdout, /idem consumer resume billing_v2/);
    const resumed = await idem(['consumer', 'resume', consumer, '--db', db, '--json']);
    assert.equal(resumed.code, 0, resumed.stderr);
    assert.equal(json<ConsumerInfo>(resumed).pause, null);
    assert.notEqual((await store.consumers.get(consumer)).status, 'paused');
  });

  it('consumer release ends a live lease (the owner is fenced) so reset works; unknown exits 1, a bad name 2', async () => {
    const owner = await store.subscribe(consumer, {
      filter: { categories: [cat] },
      owner: 'gone-away',
      leaseTtlMs: 300_000,
    });
    try {
      assert.equal((await idem(['consumer', 'reset', consumer, '--to', '0', '--db', db])).code, 3);
      const released = await idem(['consumer', 'release', consumer, '--db', db]);
      assert.equal(released.code, 0, released.stderr);
      assert.match(released.stdout, new RegExp(`^consumer ${consumer} released \\(status stopped, epoch `));
      const info = await store.consumers.get(consumer);
      assert.equal(info.owner, null);
      assert.equal(info.epoch, owner.epoch + 1);
      await assert.rejects(
        owner.fail({ error: { message: 'late' } }),
        (err: { code?: string }) => err.code === 'fenced',
      );
      const reset = await idem(['consumer', 'reset', consumer, '--to', String(info.position), '--db', db]);
      assert.equal(reset.code, 0, reset.stderr);
      const [again, missing, bad, help] = await Promise.all([
        idem(['consumer', 'release', consumer, '--db', db, '--json']),
        idem(['consumer', 'release', 'nobody_v1', '--db', db]),
        idem(['consumer', 'release', 'bad name', '--db', db]),
        idem(['consumer', 'release', '--help']),
      ]);
      assert.equal(again.code, 0, again.stderr);
      assert.equal(json<ConsumerInfo>(again).epoch, owner.epoch + 1, 'a second release changes nothing');
      assert.equal(missing.code, 1);
      assert.match(missing.stderr, /^idem: not_found: /m);
      assert.equal(bad.code, 2);
      assert.equal(help.code, 0);
      assert.match(help.stdout, /fenced/);
      assert.match(help.stdout, /idem consumer release billing_v2/);
    } finally {
      await owner.close().catch(() => undefined);
    }
  });

  it('consumers lists a consumer stored with a filter over the limits with its error; show and delete work', async () => {
    const wide = randomConsumer('wide');
    await (await store.subscribe(wide)).close();
    const filter = JSON.stringify({ types: Array.from({ length: 300 }, (_, i) => `t${i}`) });
    store.db
      .prepare(`UPDATE idem_consumers SET filter = ?, filter_key = ? WHERE name = ?`)
      .run(filter, filter, wide);
    const [list, show] = await Promise.all([
      idem(['consumers', '--db', db]),
      idem(['consumer', 'show', wide, '--db', db]),
    ]);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, new RegExp(`\\n${wide}\\s+stopped \\(error: invalid_input\\)`));
    assert.match(list.stdout, new RegExp(`\\n${consumer}\\s`), 'the other consumers still list');
    assert.equal(show.code, 0, show.stderr);
    assert.match(show.stdout, /\nerror\s+invalid_input: filter\.types: must have at most 256 entries/);
    assert.equal((await idem(['consumer', 'delete', wide, '--db', db])).code, 0);
  });

  it('a different filter under the same name exits 3 (consumer_identity_conflict)', async () => {
    const r = await idem(['tail', '--consumer', consumer, '--type', 'something.else', '--db', db]);
    assert.equal(r.code, 3);
    assert.match(r.stderr, /^idem: consumer_identity_conflict: .*_v2/m);
  });

  it('consumer reset moves the cursor, and delete removes the consumer', async () => {
    const missingTo = await idem(['consumer', 'reset', consumer, '--db', db]);
    assert.equal(missingTo.code, 2);
    assert.match(missingTo.stderr, /--to/);
    const reset = await idem(['consumer', 'reset', consumer, '--to', '0', '--db', db]);
    assert.equal(reset.code, 0, reset.stderr);
    assert.match(reset.stdout, new RegExp(`^consumer ${consumer} reset to position 0 `));
    assert.equal((await store.consumers.get(consumer)).position, 0);
    const del = await idem(['consumer', 'delete', consumer, '--db', db, '--json']);
    assert.equal(del.code, 0, del.stderr);
    assert.deepEqual(json(del), { deleted: consumer });
    const gone = await idem(['consumer', 'show', consumer, '--db', db]);
    assert.equal(gone.code, 1);
    const none = await idem(['consumers', '--db', db, '--json']);
    assert.equal(
      json<ConsumerInfo[]>(none).some((c) => c.name === consumer),
      false,
    );
  });
});

describe('idem dlq retry|skip in bulk', () => {
  it('--error retries the matching entities, --all --limit skips a page at a time, progress on stderr', async () => {
    const dir = tempDir();
    const db = dir.file('idem.db');
    const store = await openSqliteStore({ path: db });
    try {
      const cat = randomCategory('bulk');
      const streams = ['a', 'b', 'c', 'd'].map((s) => `${cat}-${s}`);
      for (const s of streams) await store.append(s, [{ type: 'x', data: {} }]);
      const name = randomConsumer('bulk');
      const sub = await store.subscribe(name, { filter: { categories: [cat] } });
      try {
        const events = await firstBatch(sub);
        for (const [i, e] of events.entries()) {
          const error = i < 2 ? { name: 'TimeoutError', message: 'slow' } : { message: 'bad data' };
          await sub.park(e.position, { reason: 'handler failed', error });
        }
        await sub.ack(events.at(-1)!.position);
      } finally {
        await sub.close();
      }
      const [usage, limitAlone] = await Promise.all([
        idem(['dlq', 'retry', name, '--all', '--error', 'x', '--db', db]),
        idem(['dlq', 'retry', name, '--stream', streams[0]!, '--limit', '2', '--db', db]),
      ]);
      assert.equal(usage.code, 2, usage.stderr);
      assert.equal(limitAlone.code, 2, limitAlone.stderr);
      const retried = await idem(['dlq', 'retry', name, '--error', 'TimeoutError', '--db', db]);
      assert.equal(retried.code, 0, retried.stderr);
      assert.match(retried.stdout, /^retrying 2 dead letters of 2 entities matching "TimeoutError" for /);
      assert.match(retried.stderr, /^retrying 2 dead letters of 2 entities \(through .*-b\)$/m);
      const page = await idem([
        'dlq',
        'skip',
        name,
        '--all',
        '--limit',
        '1',
        '--by',
        'ops',
        '--db',
        db,
        '--json',
      ]);
      assert.equal(page.code, 0, page.stderr);
      assert.deepEqual(json(page), {
        consumer: name,
        action: 'skip',
        entities: 1,
        events: 1,
        last: streams[0],
        done: false,
      });
      const rest = await idem(['dlq', 'skip', name, '--all', '--by', 'ops', '--db', db]);
      assert.match(rest.stdout, /^skipped 3 dead letters of 3 entities for /);
      assert.equal((await store.deadLetters.list(name)).length, 0);
    } finally {
      await store.close();
      await dir.cleanup();
    }
  });
});
