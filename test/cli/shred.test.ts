import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EncryptOptions } from '../../src/core/encryption.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { randomStream, tempDir } from '../support/index.js';
import { idem, json } from './cli.js';

const encrypt: EncryptOptions = {
  subject: (e) => (typeof e.metadata['customer'] === 'string' ? e.metadata['customer'] : null),
};

describe('idem shred', () => {
  it('deletes the subject key only with --yes; the events then read back with data null', async () => {
    const dir = tempDir();
    try {
      const db = dir.file('idem.db');
      const stream = randomStream('customer');
      const store = await openSqliteStore({ path: db, encrypt });
      await store.append(stream, [
        {
          type: 'customer.registered',
          data: { email: 'dora@example.com' },
          metadata: { customer: 'c-dora' },
        },
      ]);
      await store.close();

      const unconfirmed = await idem(['shred', 'c-dora', '--db', db]);
      assert.equal(unconfirmed.code, 2);
      assert.match(unconfirmed.stderr, /--yes/);
      const done = await idem(['shred', 'c-dora', '--yes', '--db', db, '--json']);
      assert.equal(done.code, 0, done.stderr);
      assert.deepEqual(json(done), { subject: 'c-dora', shredded: true });
      const again = await idem(['shred', 'c-dora', '--yes', '--db', db]);
      assert.match(again.stdout, /no key/);

      const reopened = await openSqliteStore({ path: db, encrypt });
      try {
        const events = [];
        for await (const e of reopened.readStream(stream)) events.push(e);
        assert.deepEqual(
          events.map((e) => [e.version, e.data, e.metadata]),
          [[1, null, { customer: 'c-dora', shredded: true }]],
        );
      } finally {
        await reopened.close();
      }
    } finally {
      await dir.cleanup();
    }
  });
});
