import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { AppendResult, ConsumerInfo, RecordedEvent } from '../../src/core/index.js';
import { createTempDatabase, randomStream, requireOrSkip, type TempDatabase } from '../support/index.js';
import { idem, json, startIdem } from './cli.js';

const skip = await requireOrSkip('postgres');

describe('idem on the PostgreSQL store (--postgres and IDEM_POSTGRES_URL)', { skip }, () => {
  let database: TempDatabase;
  let url: string;
  before(async () => {
    database = await createTempDatabase('idem_cli');
    url = database.connectionString;
  });
  after(() => database?.drop());

  it('append, read, events and verify work with --postgres; conflicts exit 3', async () => {
    const stream = randomStream('invoice');
    const first = await idem([
      'append',
      stream,
      '--type',
      'invoice.issued',
      '--data',
      '{"amount":1}',
      '--postgres',
      url,
      '--json',
    ]);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(json<AppendResult>(first).version, 1);
    const id = json<AppendResult>(first).ids[0]!;
    const [dup, conflict, read, events] = await Promise.all([
      idem([
        'append',
        stream,
        '--type',
        'invoice.issued',
        '--data',
        '{"amount":1}',
        '--id',
        id,
        '--postgres',
        url,
      ]),
      idem([
        'append',
        stream,
        '--type',
        'invoice.paid',
        '--data',
        '{}',
        '--expected-version',
        'no_stream',
        '--postgres',
        url,
      ]),
      idem(['read', stream, '--postgres', url, '--json']),
      idem(['events', '--type', 'invoice.issued', '--postgres', url]),
    ]);
    assert.equal(dup.code, 0, dup.stderr);
    assert.match(dup.stdout, /^duplicate: nothing written/);
    assert.equal(conflict.code, 3);
    assert.match(conflict.stderr, /^idem: wrong_expected_version: /m);
    assert.deepEqual(
      json<RecordedEvent[]>(read).map((e) => e.data),
      [{ amount: 1 }],
    );
    assert.match(events.stdout, new RegExp(`^#1 ${stream}@1 invoice\\.issued `));
    const verify = await idem(['verify', '--postgres', url]);
    assert.equal(verify.code, 0, verify.stderr);
    assert.match(verify.stdout, /^ok: postgres:\/\/.*: 1 event in 1 stream, head 1;/);
  });

  it('IDEM_POSTGRES_URL selects the PostgreSQL store when no store option is given', async () => {
    const env = { IDEM_POSTGRES_URL: url };
    const stream = randomStream('env');
    const appended = await idem(['append', stream, '--type', 'env.used', '--data', 'null'], { env });
    assert.equal(appended.code, 0, appended.stderr);
    const [read, consumers] = await Promise.all([
      idem(['read', stream, '--json'], { env }),
      idem(['consumers', '--json'], { env }),
    ]);
    assert.equal(json<RecordedEvent[]>(read).length, 1);
    assert.ok(Array.isArray(json<ConsumerInfo[]>(consumers)));
  });

  it('tail --postgres prints an event appended after it starts', async () => {
    const tail = await startIdem(['tail', '--postgres', url]);
    try {
      await tail.waitFor(/tailing postgres:\/\/.* after position \d+;/, 'stderr');
      const stream = randomStream('tailed');
      const r = await idem(['append', stream, '--type', 'tailed.event', '--data', '7', '--postgres', url]);
      assert.equal(r.code, 0, r.stderr);
      await tail.waitFor(new RegExp(`${stream}@1 tailed\\.event \\S+ 7`));
    } finally {
      const exit = await tail.stop('SIGINT');
      assert.equal(exit.code, 0, exit.stderr);
    }
  });
});
