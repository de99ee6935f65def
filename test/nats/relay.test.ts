import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { headers } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { createJetStreamRelay, type JetStreamRelay } from '../../src/nats/index.js';
import { openSqliteStore, type SqliteEventStore } from '../../src/sqlite/index.js';
import { NATS_URL, requireOrSkip, tempDir, until, type TempDir } from '../support/index.js';
import { natsFixture, type NatsFixture } from './natsSupport.js';

const skip = await requireOrSkip('nats');

describe('JetStream relay (nats-server at 127.0.0.1:4222, SQLite store)', { skip }, () => {
  let nats: NatsFixture;
  let dir: TempDir;
  let store: SqliteEventStore;
  let n = 0;

  before(async () => {
    nats = await natsFixture();
    dir = tempDir();
    store = await openSqliteStore({ path: dir.file('store.db') });
  });
  after(async () => {
    await store.close();
    await nats.close();
    await dir.cleanup();
  });

  async function appendInvoices(count: number, prefix = `invoice-${++n}`): Promise<void> {
    for (let i = 0; i < count; i++)
      await store.append(`${prefix}-${i % 7}`, [
        { type: i % 2 ? 'invoice.paid' : 'invoice.issued', data: { i, note: 'é ✓ 🚀' }, metadata: { k: i } },
      ]);
  }

  async function withRelay<T>(
    options: Partial<Parameters<typeof createJetStreamRelay>[0]> & { stream: string },
    fn: (relay: JetStreamRelay) => Promise<T>,
  ): Promise<T> {
    const relay = createJetStreamRelay({ store, servers: NATS_URL, create: true, ...options });
    await relay.start();
    try {
      return await fn(relay);
    } finally {
      await relay.stop();
    }
  }

  it('publishes every committed event in position order, with its id, headers, data and metadata, then live ones', async () => {
    const stream = nats.streamName();
    const name = `relay_${n}`;
    await appendInvoices(120);
    await withRelay({ stream, name }, async (relay) => {
      await relay.whenCaughtUp();
      await appendInvoices(30);
      await relay.whenCaughtUp();
      assert.equal(relay.status().state, 'running');
    });
    const expected = [];
    for await (const e of store.readAll()) expected.push(e);
    const got = await nats.relayed(stream);
    assert.deepEqual(got, expected);
    const info = await store.consumers.get(name);
    assert.equal(info.position, expected.at(-1)!.position, 'the cursor moved after the PubAcks');
  });

  it('never publishes twice after a restart whose cursor is behind the stream, after the duplicate window passed', async () => {
    const stream = nats.streamName();
    const name = `relay_restart_${n}`;
    await appendInvoices(50);
    const create = { duplicateWindowMs: 100 };
    await withRelay({ stream, name, create }, (relay) => relay.whenCaughtUp());
    const before = (await nats.relayed(stream)).length;
    // As if the relay died after JetStream's PubAcks and before the store's ack: the cursor goes back.
    await store.consumers.reset(name, 0);
    // The duplicate window (100 ms) passes, so JetStream alone would store the events again.
    const passed = Date.now() + 300;
    await until(() => Date.now() > passed, { message: 'the duplicate window to pass' });
    await appendInvoices(10);
    await withRelay({ stream, name, create }, async (relay) => {
      await relay.whenCaughtUp();
      assert.equal(relay.status().published, 10);
      assert.equal(relay.status().duplicates, 0);
    });
    const got = await nats.relayed(stream);
    assert.equal(got.length, before + 10);
    const positions = got.map((e) => e!.position);
    assert.deepEqual(
      positions,
      [...positions].sort((a, b) => a - b),
    );
    assert.equal(new Set(got.map((e) => e!.id)).size, got.length, 'each event once');
  });

  it('relays only what the filter takes, and is caught up although its last event is below the head', async () => {
    const stream = nats.streamName();
    await appendInvoices(40);
    await withRelay({ stream, name: `relay_paid_${n}`, filter: { types: ['invoice.paid'] } }, (relay) =>
      relay.whenCaughtUp(),
    );
    const got = await nats.relayed(stream);
    const expected = [];
    for await (const e of store.readAll({ filter: { types: ['invoice.paid'] } })) expected.push(e);
    assert.deepEqual(got, expected);
  });

  it('one relay per consumer: a second waits as standby and takes over without publishing twice', async () => {
    const stream = nats.streamName();
    const name = `relay_pair_${n}`;
    await appendInvoices(60);
    const first = createJetStreamRelay({ store, servers: NATS_URL, stream, name, create: true });
    const second = createJetStreamRelay({ store, servers: NATS_URL, stream, name });
    await first.start();
    await first.whenCaughtUp();
    await second.start();
    await appendInvoices(20);
    await first.whenCaughtUp();
    assert.equal(second.status().published, 0, 'the standby publishes nothing');
    await first.stop();
    await appendInvoices(20);
    await second.whenCaughtUp();
    await second.stop();
    assert.equal(second.status().published, 20);
    const got = await nats.relayed(stream);
    assert.equal(got.length, await store.headPosition(), 'a new relay consumer starts at the first event');
    assert.equal(new Set(got.map((e) => e!.id)).size, got.length, 'each event once');
  });

  it('refuses a stream it cannot own: missing without create, other subjects, another publisher', async () => {
    const missing = nats.streamName();
    const relay = createJetStreamRelay({ store, servers: NATS_URL, stream: missing });
    await assert.rejects(relay.start(), (err: { code?: string; message: string }) => {
      assert.equal(err.code, 'not_found');
      assert.match(err.message, /does not exist; create it/);
      return true;
    });

    const other = nats.streamName();
    await nats.jsm.streams.add({ name: other, subjects: [`${other}.elsewhere`] });
    await assert.rejects(
      createJetStreamRelay({ store, servers: NATS_URL, stream: other }).start(),
      (err: { code?: string; message: string }) => {
        assert.equal(err.code, 'invalid_input');
        assert.match(err.message, /does not take subject/);
        return true;
      },
    );

    const shared = nats.streamName();
    await nats.jsm.streams.add({ name: shared, subjects: [`${shared}.>`] });
    const h = headers();
    h.set('Who', 'someone else');
    await jetstream(nats.nc).publish(`${shared}.events`, 'not idem', { headers: h });
    const foreign = createJetStreamRelay({ store, servers: NATS_URL, stream: shared, name: `relay_f_${n}` });
    await foreign.start();
    await until(() => foreign.status().state === 'failed', { message: 'the relay to fail' });
    assert.match(foreign.status().lastError!.message, /another publisher writes to it/);
    await assert.rejects(foreign.whenCaughtUp(), /another publisher/);
    await foreign.stop();
  });

  it('names the field and the rule for bad options', () => {
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ stream: 'a.b' }, /^stream: must be a JetStream stream name/],
      [{ stream: 'S', subject: 'a.*' }, /^subject: must be a NATS subject/],
      [{ stream: 'S', window: 0 }, /^window: must be an integer from 1 to 10000/],
      [{ stream: 'S', batchSize: 1e9 }, /^batchSize: must be an integer from 1 to 5000/],
      [{ stream: 'S', name: 'no spaces' }, /^name: may contain only/],
      [{ stream: 'S', windw: 5 }, /^windw: unknown option; did you mean window\?/],
      [{ stream: 'S', create: { replica: 3 } }, /^create.replica: unknown option; did you mean replicas\?/],
    ];
    for (const [options, message] of bad)
      assert.throws(
        () => createJetStreamRelay({ store, servers: NATS_URL, ...options } as never),
        (err: { code?: string; message: string }) =>
          err.code === 'invalid_input' && message.test(err.message),
        JSON.stringify(options),
      );
  });
});
