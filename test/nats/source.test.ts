import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type Database from 'better-sqlite3';
import { Registry } from 'prom-client';
import { headers } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { createConsumer, type Consumer } from '../../src/consumer/consumer.js';
import type { ConsumerOptions } from '../../src/consumer/options.js';
import type { RecordedEvent } from '../../src/core/event.js';
import { isIdemError } from '../../src/core/errors.js';
import type { Subscription } from '../../src/core/subscription.js';
import {
  createJetStreamRelay,
  jetStreamSource,
  type JetStreamSource,
  type JetStreamSourceOptions,
} from '../../src/nats/index.js';
import {
  openSqliteStore,
  sqliteTarget,
  type SqliteEventStore,
  type SqliteTarget,
} from '../../src/sqlite/index.js';
import { NATS_URL, requireOrSkip, tempDir, until, type TempDir } from '../support/index.js';
import { writeEventHeaders } from '../../src/nats/relayMessage.js';
import { natsFixture, type NatsFixture } from './natsSupport.js';

const skip = await requireOrSkip('nats');

describe('JetStream source (nats-server at 127.0.0.1:4222, SQLite store and target)', { skip }, () => {
  let nats: NatsFixture;
  let dir: TempDir;
  let store: SqliteEventStore;
  let n = 0;
  const closing: { close(): Promise<void> }[] = [];

  before(async () => {
    nats = await natsFixture();
    dir = tempDir();
    store = await openSqliteStore({ path: dir.file('store.db') });
  });
  after(async () => {
    for (const c of closing.reverse()) await c.close().catch(() => undefined);
    await store.close();
    await nats.close();
    await dir.cleanup();
  });

  async function appendInvoices(
    count: number,
    prefix: string,
    type = (_i: number) => 'invoice.line',
  ): Promise<void> {
    for (let i = 0; i < count; i++)
      await store.append(`${prefix}-${i % 5}`, [{ type: type(i), data: { i }, metadata: { k: i } }]);
  }

  /** Relays the whole store (or a filter of it) into a fresh stream; returns the stream. */
  async function relayed(filter?: { types: string[] }): Promise<string> {
    const stream = nats.streamName();
    const relay = createJetStreamRelay({
      store,
      servers: NATS_URL,
      stream,
      create: true,
      name: `relay_${stream}`,
      ...(filter && { filter }),
    });
    await relay.start();
    await relay.whenCaughtUp();
    await relay.stop();
    return stream;
  }

  function source(stream: string, options: Partial<JetStreamSourceOptions> = {}): JetStreamSource {
    const s = jetStreamSource({
      servers: NATS_URL,
      stream,
      durable: `d_${++n}`,
      ackWaitMs: 1000,
      ...options,
    });
    closing.push(s);
    return s;
  }

  function target(): SqliteTarget {
    const t = sqliteTarget(dir.file(`target-${++n}.db`));
    t.db.exec(
      'CREATE TABLE applied (id TEXT, stream TEXT, version INTEGER, position INTEGER, recovered INTEGER)',
    );
    closing.push(t);
    return t;
  }

  function applied(
    t: SqliteTarget,
  ): { id: string; stream: string; version: number; position: number; recovered: number }[] {
    return t.db.prepare('SELECT * FROM applied ORDER BY rowid').all() as never;
  }

  function consumer(
    src: JetStreamSource | ConsumerOptions<Database.Database>['source'],
    t: SqliteTarget,
    more: Partial<ConsumerOptions<Database.Database>> = {},
  ): Consumer {
    return createConsumer<Database.Database>({
      name: `c_${++n}`,
      source: src,
      target: t,
      batch: { size: 20 },
      reconnect: { initialDelayMs: 10, maxDelayMs: 100 },
      handle: (e, ctx) => {
        ctx.tx
          .prepare('INSERT INTO applied VALUES (?, ?, ?, ?, ?)')
          .run(e.id, e.stream, e.version, e.position, ctx.recovered ? 1 : 0);
      },
      ...more,
    } as ConsumerOptions<Database.Database>);
  }

  async function storeEvents(after = 0): Promise<RecordedEvent[]> {
    const out: RecordedEvent[] = [];
    for await (const e of store.readAll({ after })) out.push(e);
    return out;
  }

  it('hands every relayed event to the handler once, as the store has it, then live ones; metrics show JetStream', async () => {
    const head0 = await store.headPosition();
    await appendInvoices(60, `invoice-a${n}`);
    const stream = await relayed();
    const t = target();
    const registry = new Registry();
    const c = consumer(source(stream), t, { filter: { categories: [`invoice`] }, metrics: { registry } });
    await c.start();
    try {
      await c.whenCaughtUp({ timeoutMs: 20_000 });
      const relay = createJetStreamRelay({ store, servers: NATS_URL, stream, name: `relay_${stream}` });
      await relay.start();
      await appendInvoices(25, `invoice-b${n}`);
      await relay.whenCaughtUp();
      await relay.stop();
      await c.whenCaughtUp({ timeoutMs: 20_000 });
      const want = (await storeEvents()).filter((e) => e.stream.startsWith('invoice'));
      const got = applied(t);
      assert.deepEqual(
        got.map((r) => r.id),
        want.map((e) => e.id),
      );
      assert.ok(want.length >= 85 && want.at(-1)!.position > head0);
      const m = c.metrics();
      assert.equal(m.processed, want.length);
      assert.equal(m.position, want.at(-1)!.position, 'the acknowledged position is the idem position');
      assert.ok(m.source, 'the source reports its figures');
      assert.equal(m.source.received, want.length);
      assert.equal(m.source.acked, want.length);
      assert.equal(typeof m.source.pending, 'number');
      assert.equal(typeof m.source.ackPending, 'number');
      const prom = await registry.getSingleMetricAsString('idem_consumer_source');
      for (const figure of ['pending', 'ackPending', 'redelivered', 'maxDeliveryCount'])
        assert.match(prom, new RegExp(`figure="${figure}"`), `Prometheus shows ${figure}`);
    } finally {
      await c.stop();
    }
  });

  it('gets messages committed but not acknowledged again after a crash, and the ledger skips them', async () => {
    await appendInvoices(40, `invoice-c${n}`);
    const stream = await relayed();
    const total = (await storeEvents()).length;
    const t = target();
    const durable = `crash_${++n}`;
    const name = `c_crash_${n}`;
    // The first life commits every batch and never acknowledges (it "dies" before each ack).
    const first = source(stream, { durable });
    const noAcks = {
      subscribe: async (consumerName: string, o?: Parameters<JetStreamSource['subscribe']>[1]) => {
        const sub = await first.subscribe(consumerName, o);
        const hooked: Subscription = {
          consumer: sub.consumer,
          epoch: sub.epoch,
          startPosition: sub.startPosition,
          ack: () => Promise.resolve(),
          park: (position, info) => sub.park(position, info),
          fail: (info) => sub.fail(info),
          outage: (active) => sub.outage(active),
          close: () => sub.close(),
          [Symbol.asyncIterator]: () => sub[Symbol.asyncIterator](),
        };
        return hooked;
      },
      headPosition: () => first.headPosition(),
    };
    const a = consumer(noAcks, t, { name });
    await a.start();
    await until(() => a.metrics().processed === total, {
      timeoutMs: 20_000,
      message: 'the first life to commit',
    });
    await a.stop();
    await first.close();
    const b = consumer(source(stream, { durable }), t, { name });
    await b.start();
    try {
      await b.whenCaughtUp({ timeoutMs: 20_000 });
      assert.equal(applied(t).length, total, 'nothing applied twice');
      assert.equal(b.metrics().processed, 0);
      assert.equal(b.metrics().duplicates, total, 'every redelivered message skipped');
      assert.equal(
        b.metrics().source!.remade,
        1,
        'the durable was made again from its acknowledgement floor',
      );
    } finally {
      await b.stop();
    }
  });

  it('fills a version gap from the store given as recoverFrom, and stops at it without one', async () => {
    const prefix = `order-g${++n}`;
    await appendInvoices(30, prefix, (i) => (i % 3 === 1 ? 'order.noted' : 'order.placed'));
    // The relay leaves out every order.noted: each entity's versions have holes in the stream.
    const stream = await relayed({ types: ['order.placed'] });
    const events = (await storeEvents()).filter((e) => e.stream.startsWith(prefix));
    // A gap shows when a later version arrives: versions after an entity's last relayed one stay unseen.
    const lastRelayed = new Map<string, number>();
    for (const e of events) if (e.type === 'order.placed') lastRelayed.set(e.stream, e.version);
    const want = events.filter((e) => e.version <= (lastRelayed.get(e.stream) ?? 0));
    const t = target();
    const c = consumer(source(stream, { recoverFrom: store }), t, {
      guard: 'entity-version',
      filter: { categories: ['order'] },
    });
    await c.start();
    try {
      await c.whenCaughtUp({ timeoutMs: 20_000 });
      const got = applied(t).filter((r) => r.stream.startsWith(prefix));
      assert.deepEqual(got.map((r) => r.id).sort(), want.map((e) => e.id).sort());
      assert.ok(got.some((r) => r.recovered === 1));
      assert.ok(c.metrics().recovered > 0);
    } finally {
      await c.stop();
    }
    const t2 = target();
    const without = consumer(source(stream), t2, {
      guard: 'entity-version',
      filter: { categories: ['order'] },
    });
    await without.start();
    await until(() => without.status().state === 'failed', {
      timeoutMs: 20_000,
      message: 'a stop at the gap',
    });
    assert.match(without.status().lastError!.message, /recoverFrom/);
    await without.stop();
  });

  it("gaps: 'wait' holds only the entity whose version is missing until it arrives, then fails after gapWaitMs", async () => {
    const stream = nats.streamName();
    await nats.jsm.streams.add({ name: stream, subjects: [`${stream}.>`] });
    const js = jetstream(nats.nc);
    const at = new Date(0).toISOString();
    const publish = (id: string, entity: string, version: number, position: number) => {
      const e = {
        id,
        stream: entity,
        version,
        position,
        type: 'acct.changed',
        data: { version },
        metadata: {},
        recordedAt: at,
      };
      return js.publish(`${stream}.events`, new TextEncoder().encode(JSON.stringify(e.data)), {
        msgID: id,
        headers: writeEventHeaders(headers(), e),
      });
    };
    const ids = Array.from({ length: 6 }, () => randomUUID());
    // acct-1 arrives v1, v3 (v2 missing), acct-2 v1; v2 of acct-1 comes later, as from another publisher.
    await publish(ids[0]!, 'acct-1', 1, 1);
    await publish(ids[2]!, 'acct-1', 3, 3);
    await publish(ids[3]!, 'acct-2', 1, 4);
    const t = target();
    const c = consumer(source(stream), t, { guard: 'entity-version', gaps: 'wait', gapWaitMs: 60_000 });
    await c.start();
    try {
      await until(() => applied(t).some((r) => r.stream === 'acct-2'), {
        timeoutMs: 20_000,
        message: 'the other entity to go on',
      });
      assert.deepEqual(
        applied(t).map((r) => `${r.stream}@${r.version}`),
        ['acct-1@1', 'acct-2@1'],
        'acct-1 v3 waits for v2',
      );
      assert.equal(c.metrics().position, 1, 'nothing at or after the held event is acknowledged');
      await publish(ids[1]!, 'acct-1', 2, 2);
      await until(() => applied(t).length === 4, { timeoutMs: 20_000, message: 'v2 then v3' });
      assert.deepEqual(
        applied(t).map((r) => `${r.stream}@${r.version}`),
        ['acct-1@1', 'acct-2@1', 'acct-1@2', 'acct-1@3'],
      );
      await until(() => c.metrics().position === 4, { timeoutMs: 20_000, message: 'the acks to catch up' });
    } finally {
      await c.stop();
    }
    // A version that never comes: after gapWaitMs the gap policy applies (no store to recover from: a stop).
    await publish(ids[4]!, 'acct-3', 2, 5);
    const t2 = target();
    const c2 = consumer(source(stream), t2, { guard: 'entity-version', gaps: 'wait', gapWaitMs: 300 });
    await c2.start();
    try {
      await until(() => c2.status().state === 'failed', {
        timeoutMs: 20_000,
        message: 'the stop at the gap',
      });
      assert.match(c2.status().lastError!.message, /acct-3/);
      assert.deepEqual(
        applied(t2).map((r) => `${r.stream}@${r.version}`),
        ['acct-1@1', 'acct-2@1', 'acct-1@2', 'acct-1@3'],
        'every entity but acct-3 applied, acct-1 in version order',
      );
    } finally {
      await c2.stop();
    }
  });

  it('terminates a message that no relay published, and goes on', async () => {
    await appendInvoices(5, `invoice-f${++n}`);
    const stream = await relayed();
    await jetstream(nats.nc).publish(`${stream}.events`, new TextEncoder().encode('{}'), {
      headers: headers(),
    });
    const relay = createJetStreamRelay({ store, servers: NATS_URL, stream, name: `relay_${stream}` });
    const t = target();
    const c = consumer(source(stream), t);
    await c.start();
    try {
      await until(() => c.metrics().source?.foreign === 1, {
        timeoutMs: 20_000,
        message: 'the foreign message',
      });
      assert.equal(c.metrics().processed, (await storeEvents()).length);
      assert.equal(c.status().state, 'running');
    } finally {
      await c.stop();
      await relay.stop();
    }
  });

  it('refuses dead letters (no store to keep them), bad options and a durable of another filter', async () => {
    await appendInvoices(3, `invoice-d${++n}`);
    const stream = await relayed();
    const t = target();
    const c = consumer(source(stream), t, {
      onError: { attempts: 1, then: 'dead-letter' },
      handle: () => {
        throw new Error('poison');
      },
    });
    await c.start();
    await until(() => c.status().state === 'failed', { timeoutMs: 20_000, message: 'the consumer to fail' });
    assert.equal(c.status().lastError!.code, 'invalid_input');
    assert.match(c.status().lastError!.message, /dead letters/);
    await c.stop();
    assert.equal(applied(t).length, 0);

    assert.throws(() => jetStreamSource({ servers: NATS_URL, stream: 'a.b', durable: 'd' }), /stream/);
    assert.throws(
      () => jetStreamSource({ servers: NATS_URL, stream, durable: 'd', ackWaitMs: 0 }),
      /ackWaitMs/,
    );
    assert.throws(() => jetStreamSource({ stream, durable: 'd' }), /servers/);
    const durable = `filtered_${++n}`;
    await nats.jsm.consumers.add(stream, {
      durable_name: durable,
      ack_policy: 'explicit',
      filter_subject: `${stream}.events`,
    });
    await assert.rejects(
      source(stream, { durable }).subscribe('x'),
      (err: unknown) => isIdemError(err, 'invalid_input') && /filter/.test((err as Error).message),
    );
    await assert.rejects(source('IDEM_TEST_MISSING_STREAM').subscribe('x'), (err: unknown) =>
      isIdemError(err, 'not_found'),
    );
  });
});
