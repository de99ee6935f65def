// OpenTelemetry traces with the SDK's in-memory exporter: an append records its trace in
// metadata.traceparent, and the consumer's delivery, handler batch and commit are spans of it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { createConsumer } from '../../src/consumer/index.js';
import { openSqliteStore, sqliteTarget, type SqliteEventStore } from '../../src/sqlite/index.js';
import { randomConsumer, randomStream, tempDir, until, type TempDir } from '../support/index.js';

describe('traces', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const contextManager = new AsyncLocalStorageContextManager();
  let dir: TempDir;
  let store: SqliteEventStore;

  before(async () => {
    context.setGlobalContextManager(contextManager.enable());
    trace.setGlobalTracerProvider(provider);
    dir = tempDir();
    store = await openSqliteStore({ path: dir.file('events.db') });
  });

  after(async () => {
    await store.close();
    await provider.shutdown();
    trace.disable();
    context.disable();
    await dir.cleanup();
  });

  const named = (name: string): ReadableSpan[] => exporter.getFinishedSpans().filter((s) => s.name === name);
  const parentOf = (s: ReadableSpan): string | undefined => s.parentSpanContext?.spanId;

  it('carries an append through delivery, the handler batch and the commit', async () => {
    const stream = randomStream('order');
    const tracer = trace.getTracer('test');
    const { traceId, appended } = await tracer.startActiveSpan('place order', async (span) => {
      const appended = await store.append(stream, [{ type: 'order.placed', data: { n: 1 } }]);
      span.end();
      return { traceId: span.spanContext().traceId, appended };
    });

    const events = [];
    for await (const e of store.readStream(stream)) events.push(e);
    const event = events[0];
    const append = named('idem.append').find((s) => s.spanContext().traceId === traceId)!;
    assert.ok(append, 'the append is a span of the caller trace');
    assert.equal(event!.metadata.traceparent, `00-${traceId}-${append.spanContext().spanId}-01`);
    assert.equal(append.attributes['idem.stream'], stream);
    assert.equal(append.attributes['idem.position.first'], appended.firstPosition);

    const name = randomConsumer('traced');
    const target = sqliteTarget(dir.file('target.db'));
    const consumer = createConsumer({
      name,
      source: store,
      target,
      filter: { streamPrefixes: [stream] },
      handle: () => undefined,
    });
    try {
      await consumer.start();
      await consumer.whenCaughtUp();
      await until(() => named('idem.commit').some((s) => s.spanContext().traceId === traceId), {
        message: 'the commit span',
      });
    } finally {
      await consumer.stop();
      await target.close();
    }
    const inTrace = (n: string) => named(n).filter((s) => s.spanContext().traceId === traceId);
    const [deliver] = inTrace('idem.deliver');
    const [handle] = inTrace('idem.handle');
    const [commit] = inTrace('idem.commit');
    assert.ok(deliver && handle && commit, 'delivery, handler and commit spans in the same trace');
    assert.equal(parentOf(deliver), append.spanContext().spanId);
    assert.equal(parentOf(handle), deliver.spanContext().spanId);
    assert.equal(parentOf(commit), handle.spanContext().spanId);
    assert.equal(deliver.attributes['idem.consumer'], name);
    assert.equal(deliver.attributes['idem.position.last'], appended.lastPosition);
    assert.equal(deliver.attributes['idem.ack'], appended.lastPosition);
    assert.equal(handle.attributes['idem.outcome'], 'committed');
    assert.equal(handle.attributes['idem.processed'], 1);
  });

  it('treats a retried append from another trace as the same append', async () => {
    const stream = randomStream('order');
    const tracer = trace.getTracer('test');
    const id = '0190f5c2-8e7a-7b4c-9d2e-3f1a2b3c4d5e'.replace('3f1a', Math.random().toString(16).slice(2, 6));
    const once = () =>
      tracer.startActiveSpan('handle command', async (span) => {
        try {
          return await store.append(stream, [{ id, type: 'order.placed', data: { n: 2 } }]);
        } finally {
          span.end();
        }
      });
    const first = await once();
    const again = await once();
    assert.equal(first.duplicate, false);
    assert.equal(again.duplicate, true);
  });
});
