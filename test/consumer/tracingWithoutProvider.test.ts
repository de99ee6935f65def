// With @opentelemetry/api installed but no tracer provider registered, spans are skipped: nothing is
// recorded and appends carry no traceparent, while a trace given to continue is still carried on.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { openSpan, traced } from '../../src/core/tracing.js';
import { openSqliteStore, type SqliteEventStore } from '../../src/sqlite/index.js';
import { randomStream, tempDir, type TempDir } from '../support/index.js';

describe('traces without a tracer provider', () => {
  let dir: TempDir;
  let store: SqliteEventStore;

  before(async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    dir = tempDir();
    store = await openSqliteStore({ path: dir.file('events.db') });
  });

  after(async () => {
    await store.close();
    context.disable();
    await dir.cleanup();
  });

  it('appends without a traceparent', async () => {
    const stream = randomStream('order');
    await store.append(stream, [{ type: 'order.placed', data: { n: 1 }, metadata: { by: 'test' } }]);
    const events = [];
    for await (const e of store.readStream(stream)) events.push(e);
    assert.deepEqual(events[0]!.metadata, { by: 'test' });
  });

  it('gives a span with no traceparent, and runs the function once', async () => {
    let runs = 0;
    const tp = await traced('idem.test', {}, (span) => {
      runs++;
      span.setAttributes({ a: 1 });
      return Promise.resolve(span.traceparent);
    });
    assert.equal(tp, undefined);
    assert.equal(runs, 1);
    const open = openSpan('idem.test', {});
    assert.equal(open.traceparent, undefined);
    open.end(new Error('ignored'));
  });

  it('still carries a trace given to continue', async () => {
    const parent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const tp = await traced('idem.test', { parent }, (span) => Promise.resolve(span.traceparent));
    assert.equal(tp, parent);
    await assert.rejects(
      traced('idem.test', {}, () => Promise.reject(new Error('boom'))),
      /boom/,
    );
  });
});
