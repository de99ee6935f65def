import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { openSqliteStore, type SqliteEventStore } from '../../src/sqlite/index.js';
import { idem, startIdem } from '../cli/cli.js';
import { NATS_URL, requireOrSkip, tempDir, until, type TempDir } from '../support/index.js';
import { natsFixture, type NatsFixture } from './natsSupport.js';

const skip = await requireOrSkip('nats');

describe('idem relay (real processes, nats-server at 127.0.0.1:4222)', { skip }, () => {
  let nats: NatsFixture;
  let dir: TempDir;
  let store: SqliteEventStore;

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

  it('survives SIGKILLs while events are appended: every event once, in position order, past the duplicate window', async () => {
    const stream = nats.streamName();
    // A 1 s duplicate window, and pauses longer than it between lives: JetStream alone would store
    // again what a relay published but had not acknowledged to the store when it was killed.
    await nats.jsm.streams.add({ name: stream, subjects: [`${stream}.>`], duplicate_window: 1_000_000_000 });
    const args = [
      'relay',
      '--nats',
      NATS_URL,
      '--stream',
      stream,
      '--lease-ttl',
      '1000',
      '--db',
      dir.file('store.db'),
    ];
    let appended = 0;
    const appendSome = async (count: number): Promise<void> => {
      for (let i = 0; i < count; i++, appended++)
        await store.append(`order-${appended % 13}`, [{ type: 'order.placed', data: { n: appended } }]);
    };
    await appendSome(300);
    for (let life = 0; life < 5; life++) {
      const relay = await startIdem(args);
      const before = (await nats.jsm.streams.info(stream)).state.messages;
      const appending = appendSome(200);
      await until(async () => (await nats.jsm.streams.info(stream)).state.messages > before, {
        timeoutMs: 20_000,
        message: `life ${life} to publish`,
      });
      const result = await relay.stop('SIGKILL');
      assert.equal(result.signal, 'SIGKILL');
      await appending;
      const pause = Date.now() + 1200;
      await until(() => Date.now() > pause, { message: 'a pause longer than the duplicate window' });
    }
    const last = await startIdem([...args, '--progress', '1']);
    await until(async () => (await nats.jsm.streams.info(stream)).state.messages >= appended, {
      timeoutMs: 30_000,
      message: 'the last relay to catch up',
    });
    const result = await last.stop('SIGINT');
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /relaying .* into JetStream stream/);
    const got = await nats.relayed(stream);
    const expected = [];
    for await (const e of store.readAll()) expected.push(e);
    assert.equal(got.length, expected.length, 'lost or doubled');
    assert.deepEqual(got, expected, 'every event once, in position order');
  });

  it('explains what is missing and fails on a stream it may not use', async () => {
    const noNats = await idem(['relay', '--stream', 'S', '--db', dir.file('store.db')]);
    assert.notEqual(noNats.code, 0);
    assert.match(noNats.stderr, /--nats: is required/);
    const missing = nats.streamName();
    const r = await idem(['relay', '--nats', NATS_URL, '--stream', missing, '--db', dir.file('store.db')]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /not_found: JetStream stream .* does not exist; create it/);
    const help = await idem(['relay', '--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /Nats-Msg-Id = the\s+event id/);
    assert.match(help.stdout, /--create/);
  });
});
