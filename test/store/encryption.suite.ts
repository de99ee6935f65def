/**
 * Crypto-shredding, written once against a store opened with `encrypt` and its `shred`, for every
 * store that offers it (SQLite, PostgreSQL).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import type { EncryptOptions, KeyProvider } from '../../src/core/encryption.js';
import { isIdemError } from '../../src/core/errors.js';
import type { RecordedEvent } from '../../src/core/event.js';
import type { EventStore } from '../../src/core/eventStore.js';
import { createConsumer } from '../../src/consumer/consumer.js';
import { sqliteTarget } from '../../src/sqlite/target.js';
import { randomCategory, randomConsumer, randomStream, randomSuffix } from '../support/names.js';
import { tempDir } from '../support/tempDir.js';
import { until } from '../support/until.js';

export interface ShreddingStore extends EventStore {
  shred(subject: string): Promise<{ subject: string; shredded: boolean }>;
}

export interface EncryptionFixture {
  store: ShreddingStore;
  /** The `data` column of the stored row, as text. */
  storedData(id: string): Promise<string>;
  cleanup(): Promise<void>;
}

export type MakeEncryptedStore = (encrypt: EncryptOptions) => Promise<EncryptionFixture>;

/** Each event's subject is `metadata.customer` (none: stored in clear). */
const bySubject: EncryptOptions = {
  subject: (e) => (typeof e.metadata['customer'] === 'string' ? e.metadata['customer'] : null),
};

async function all<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

async function firstBatch(store: EventStore, name: string): Promise<RecordedEvent[]> {
  const sub = await store.subscribe(name);
  try {
    for await (const m of sub) if (m.kind === 'events') return m.events;
    throw new Error('no events');
  } finally {
    await sub.close();
  }
}

export function describeEncryption(
  label: string,
  make: MakeEncryptedStore,
  options: { skip?: string | false } = {},
): void {
  describe(`crypto-shredding (${label})`, { skip: options.skip ?? false }, () => {
    it('stores data encrypted per subject, reads it back on every read path, and shreds one subject', async () => {
      const fx = await make(bySubject);
      try {
        const { store } = fx;
        const alice = randomStream('customer');
        const bob = randomStream('customer');
        await store.append(alice, [
          {
            type: 'customer.registered',
            data: { email: 'alice@example.com' },
            metadata: { customer: 'c-alice' },
          },
          { type: 'customer.moved', data: { city: 'Lyon' }, metadata: { customer: 'c-alice' } },
        ]);
        await store.append(bob, [
          {
            type: 'customer.registered',
            data: { email: 'bob@example.com' },
            metadata: { customer: 'c-bob' },
          },
        ]);
        await store.append(randomStream('audit'), [{ type: 'audit.noted', data: { clear: true } }]);

        const before = await all(store.readAll());
        assert.deepEqual(
          before.map((e) => e.data),
          [{ email: 'alice@example.com' }, { city: 'Lyon' }, { email: 'bob@example.com' }, { clear: true }],
        );
        const raw = await fx.storedData(before[0]!.id);
        assert.ok(!raw.includes('alice@example.com'), `stored in clear: ${raw}`);
        assert.match(raw, /\$idem_encrypted/);
        assert.equal(await fx.storedData(before[3]!.id), '{"clear":true}');
        assert.deepEqual(
          (await all(store.readStream(alice))).map((e) => e.data),
          [{ email: 'alice@example.com' }, { city: 'Lyon' }],
        );
        assert.deepEqual(
          (await firstBatch(store, randomConsumer('reader'))).map((e) => e.data),
          before.map((e) => e.data),
        );

        assert.deepEqual(await store.shred('c-alice'), { subject: 'c-alice', shredded: true });
        assert.deepEqual(await store.shred('c-alice'), { subject: 'c-alice', shredded: false });
        const after = await all(store.readAll());
        assert.deepEqual(
          after.map((e) => [e.id, e.stream, e.version, e.position]),
          before.map((e) => [e.id, e.stream, e.version, e.position]),
          'ids, streams, versions and positions stay',
        );
        assert.deepEqual(after[0]!.data, null);
        assert.deepEqual(after[0]!.metadata, { customer: 'c-alice', shredded: true });
        assert.deepEqual(after[1]!.data, null);
        assert.deepEqual(after[2]!.data, { email: 'bob@example.com' });
        assert.equal(after[2]!.metadata['shredded'], undefined);
        assert.deepEqual(
          (await all(store.readStream(alice))).map((e) => [e.version, e.data, e.metadata['shredded']]),
          [
            [1, null, true],
            [2, null, true],
          ],
        );
        assert.deepEqual(
          (await firstBatch(store, randomConsumer('reader'))).map((e) => e.data),
          after.map((e) => e.data),
        );
        // A new event of the subject gets a new key; the old ones stay unreadable.
        await store.append(alice, [
          {
            type: 'customer.registered',
            data: { email: 'new@example.com' },
            metadata: { customer: 'c-alice' },
          },
        ]);
        assert.deepEqual(
          (await all(store.readStream(alice))).map((e) => e.data),
          [null, null, { email: 'new@example.com' }],
        );
      } finally {
        await fx.cleanup();
      }
    });

    it('an append repeated with the same ids is a duplicate; other content under an id is a conflict', async () => {
      const fx = await make(bySubject);
      try {
        const { store } = fx;
        const s = randomStream('customer');
        const events = [
          {
            id: '0190a3c5-0000-7000-8000-000000000001',
            type: 'customer.registered',
            data: { email: 'carol@example.com' },
            metadata: { customer: 'c-carol' },
          },
        ];
        const first = await store.append(s, events);
        const again = await store.append(s, events);
        assert.equal(first.duplicate, false);
        assert.equal(again.duplicate, true);
        assert.equal(again.lastPosition, first.lastPosition);
        await assert.rejects(
          store.append(s, [{ ...events[0]!, data: { email: 'other@example.com' } }]),
          (err: unknown) => isIdemError(err, 'idempotency_conflict'),
        );
        // After a shred the content can no longer be compared: a repeat is refused, never stored twice.
        await store.shred('c-carol');
        await assert.rejects(store.append(s, events), (err: unknown) =>
          isIdemError(err, 'idempotency_conflict'),
        );
        assert.equal((await all(store.readStream(s))).length, 1);
      } finally {
        await fx.cleanup();
      }
    });

    it('a consumer forgets a shredded subject: onShred deletes its rows, entity version and ledger rows go', async () => {
      const fx = await make(bySubject);
      const dir = tempDir();
      const target = sqliteTarget(dir.file('target.db'));
      const { store } = fx;
      const cat = randomCategory('profile');
      const [gone, kept] = [`${cat}-gone`, `${cat}-kept`];
      const [subject, other] = [`c-${randomSuffix()}`, `c-${randomSuffix()}`];
      const name = randomConsumer('profiles');
      target.db.exec('CREATE TABLE profiles (stream TEXT PRIMARY KEY, email TEXT, moves INTEGER)');
      const shredded: string[] = [];
      const consumer = createConsumer({
        name,
        source: store,
        target,
        filter: { categories: [cat] },
        guard: ['event-id', 'entity-version'],
        handle: (e, ctx) => {
          const d = e.data as { email?: string } | null;
          ctx.tx
            .prepare(
              `INSERT INTO profiles (stream, email, moves) VALUES (?, ?, 0)
               ON CONFLICT (stream) DO UPDATE SET moves = moves + 1`,
            )
            .run(e.stream, d?.email ?? null);
        },
        onShred: (stream, ctx) => {
          assert.equal(ctx.subject, subject);
          shredded.push(stream);
          ctx.tx.prepare('DELETE FROM profiles WHERE stream = ?').run(stream);
        },
      });
      try {
        await store.append(gone, [
          { type: 'registered', data: { email: 'gone@example.com' }, metadata: { customer: subject } },
          { type: 'moved', data: { city: 'Lyon' }, metadata: { customer: subject } },
        ]);
        await store.append(kept, [
          { type: 'registered', data: { email: 'kept@example.com' }, metadata: { customer: other } },
        ]);
        await consumer.start();
        await consumer.whenCaughtUp();
        const rows = () => target.db.prepare('SELECT stream FROM profiles ORDER BY stream').pluck().all();
        const versions = () =>
          target.db
            .prepare('SELECT stream FROM idem_entity_versions WHERE consumer = ? ORDER BY stream')
            .pluck()
            .all(name);
        assert.deepEqual(rows(), [gone, kept]);
        assert.deepEqual(versions(), [gone, kept]);
        assert.equal(await target.ledgerSize(name), 3);

        assert.deepEqual(await store.shred(subject), { subject, shredded: true });
        const log = (await store.shreds!(0)).filter((r) => r.subject === subject);
        assert.deepEqual(
          log.map((r) => r.stream),
          [gone],
        );
        await until(async () => (await target.shredCursor(name)) >= log[0]!.seq, {
          message: 'the consumer to follow the shred',
        });
        assert.deepEqual(shredded, [gone]);
        assert.deepEqual(rows(), [kept]);
        assert.deepEqual(versions(), [kept]);
        assert.equal(await target.ledgerSize(name), 1);
        assert.deepEqual(
          (await all(store.readStream(gone))).map((e) => [e.version, e.data, e.metadata['shredded']]),
          [
            [1, null, true],
            [2, null, true],
          ],
        );
        // The log is read in pages after a sequence number, and a bad range names its field.
        assert.deepEqual(await store.shreds!(log[0]!.seq, 1), (await store.shreds!(log[0]!.seq)).slice(0, 1));
        await assert.rejects(store.shreds!(0, 1001), (err: unknown) => isIdemError(err, 'invalid_input'));
        await assert.rejects(store.shreds!(-1), (err: unknown) => isIdemError(err, 'invalid_input'));
      } finally {
        await consumer.stop();
        await target.close();
        await dir.cleanup();
        await fx.cleanup();
      }
    });

    it('keeps the keys in a key provider given as encrypt.keys; shred and a deletion in the provider both erase', async () => {
      const held = new Map<string, Buffer>();
      const calls: string[] = [];
      const keys: KeyProvider = {
        keys: (subjects) =>
          Promise.resolve(new Map(subjects.filter((s) => held.has(s)).map((s) => [s, held.get(s)!]))),
        create: (subject) => {
          calls.push(`create ${subject}`);
          const key = randomBytes(32);
          held.set(subject, key);
          return Promise.resolve(key);
        },
        delete: (subject) => {
          calls.push(`delete ${subject}`);
          return Promise.resolve(held.delete(subject));
        },
      };
      const fx = await make({ ...bySubject, keys });
      try {
        const { store } = fx;
        const [dora, eve] = [randomStream('customer'), randomStream('customer')];
        const [d, e] = [`c-${randomSuffix()}`, `c-${randomSuffix()}`];
        await store.append(dora, [
          { type: 'customer.registered', data: { email: 'dora@example.com' }, metadata: { customer: d } },
        ]);
        await store.append(eve, [
          { type: 'customer.registered', data: { email: 'eve@example.com' }, metadata: { customer: e } },
        ]);
        assert.deepEqual(calls, [`create ${d}`, `create ${e}`]);
        const [first] = await all(store.readStream(dora));
        assert.deepEqual(first!.data, { email: 'dora@example.com' });
        const raw = await fx.storedData(first!.id);
        assert.ok(!raw.includes('dora@example.com'), `stored in clear: ${raw}`);

        assert.deepEqual(await store.shred(d), { subject: d, shredded: true });
        assert.deepEqual(calls.at(-1), `delete ${d}`);
        assert.equal(held.has(d), false);
        assert.deepEqual(
          (await store.shreds!(0)).filter((r) => r.subject === d).map((r) => r.stream),
          [dora],
          'the shred log names the stream, as with the key table',
        );
        assert.deepEqual(
          (await all(store.readStream(dora))).map((x) => [x.id, x.version, x.data, x.metadata['shredded']]),
          [[first!.id, 1, null, true]],
        );
        // A key deleted in the provider itself (no shred through the store): no key is cached.
        held.delete(e);
        assert.deepEqual(
          (await all(store.readStream(eve))).map((x) => [x.data, x.metadata['shredded']]),
          [[null, true]],
        );
      } finally {
        await fx.cleanup();
      }
    });

    it('refuses a bad subject or options, naming the field', async () => {
      const fx = await make({ subject: () => '' });
      try {
        await assert.rejects(
          fx.store.append(randomStream('x'), [{ type: 't', data: {} }]),
          (err: unknown) => isIdemError(err, 'invalid_input') && err.message.startsWith('events[0] subject'),
        );
      } finally {
        await fx.cleanup();
      }
      await assert.rejects(
        make({ subject: 'metadata.customer' as never }),
        (err: unknown) => isIdemError(err, 'invalid_input') && err.message.startsWith('encrypt.subject'),
      );
    });
  });
}
