// OpenTelemetry traces with the SDK's in-memory exporter: an append records its trace in
// metadata.traceparent, and the consumer's delivery, handler batch, commit and effect dispatch are
// spans of it.
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
import pg from 'pg';
import { createConsumer } from '../../src/consumer/index.js';
import type { ConsumerTarget } from '../../src/core/consumerTarget.js';
import { createEffectDispatcher } from '../../src/effects/dispatcher.js';
import { postgresTarget } from '../../src/postgres/target.js';
import { openSqliteStore, sqliteTarget, type SqliteEventStore } from '../../src/sqlite/index.js';
import {
  createTempSchema,
  randomConsumer,
  randomStream,
  tempDir,
  until,
  type TempDir,
} from '../support/index.js';
import { requireOrSkip } from '../support/services.js';

const pgSkip = await requireOrSkip('postgres');

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

  /** Appends in a span, handles the event with an effect and dispatches it: the effect span's trace. */
  async function effectTrace(target: ConsumerTarget<unknown>): Promise<void> {
    const stream = randomStream('invoice');
    const tracer = trace.getTracer('test');
    const { traceId, appended } = await tracer.startActiveSpan('issue invoice', async (span) => {
      const appended = await store.append(stream, [{ type: 'invoice.issued', data: { n: 7 } }]);
      span.end();
      return { traceId: span.spanContext().traceId, appended };
    });
    const append = named('idem.append').find((s) => s.spanContext().traceId === traceId)!;
    const name = randomConsumer('mailer');
    const consumer = createConsumer({
      name,
      source: store,
      target,
      filter: { streamPrefixes: [stream] },
      effects: { liveFrom: 'start' },
      handle: async (e, ctx) => {
        await ctx.effect('send-receipt', { n: (e.data as { n: number }).n }, { key: `receipt-${e.id}` });
      },
    });
    let calls = 0;
    const dispatcher = createEffectDispatcher({
      target,
      handlers: {
        'send-receipt': () => {
          calls++;
          if (calls === 1) throw new Error('mail server busy');
          return { sent: true };
        },
      },
      retry: { backoff: 'fixed', initialDelayMs: 0 },
    });
    try {
      await consumer.start();
      await consumer.whenCaughtUp();
      await until(
        async () => {
          await dispatcher.runOnce();
          return dispatcher.metrics().done > 0;
        },
        { message: 'the effect dispatched after one failed attempt' },
      );
    } finally {
      await consumer.stop();
      await dispatcher.stop();
    }
    const spans = named('idem.effect').filter((s) => s.spanContext().traceId === traceId);
    assert.equal(spans.length, 2, 'both attempts are spans of the append trace');
    const [first, second] = spans.sort(
      (a, b) => Number(a.attributes['idem.effect.attempt']) - Number(b.attributes['idem.effect.attempt']),
    );
    for (const s of [first!, second!]) {
      assert.equal(parentOf(s), append.spanContext().spanId, 'a child of the event trace context');
      assert.equal(s.attributes['idem.consumer'], name);
      assert.equal(s.attributes['idem.effect.key'], `receipt-${appended.ids[0]!}`);
      assert.equal(s.attributes['idem.effect.kind'], 'send-receipt');
    }
    assert.equal(first!.attributes['idem.effect.attempt'], 1);
    assert.equal(first!.attributes['idem.outcome'], 'retry');
    assert.equal(second!.attributes['idem.effect.attempt'], 2);
    assert.equal(second!.attributes['idem.outcome'], 'done');
  }

  it('makes effect dispatch a span of the append trace (SQLite target)', async () => {
    const target = sqliteTarget(dir.file('effects.db'));
    try {
      await effectTrace(target);
    } finally {
      await target.close();
    }
  });

  it('makes effect dispatch a span of the append trace (PostgreSQL target)', { skip: pgSkip }, async () => {
    const schema = await createTempSchema();
    const pool = new pg.Pool({ connectionString: schema.connectionString, max: 2 });
    const target = postgresTarget(pool, { schema: schema.schema });
    try {
      await effectTrace(target);
    } finally {
      await target.close();
      await pool.end();
      await schema.drop();
    }
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
