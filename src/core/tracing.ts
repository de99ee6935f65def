/**
 * Optional OpenTelemetry traces. When `@opentelemetry/api` is installed (an optional peer
 * dependency), an append records the active trace context in `metadata.traceparent` (W3C form) and
 * the consumer's delivery, handler batch, commit and effect dispatch become spans of that trace.
 * Without the package, or without a tracer provider registered and no trace to continue, every
 * function here does nothing beyond a few checks.
 */
import type * as OtelApi from '@opentelemetry/api';

type Api = typeof OtelApi;

/** The package is loaded once, when idem is first imported; a missing package is not an error. */
const api: Api | null = await import('@opentelemetry/api').then(
  (m) => m,
  () => null,
);

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
/** Links one span carries at most (a batch of many traced events links the first ones). */
const MAX_LINKS = 32;

export type SpanAttributes = Record<string, string | number | boolean>;

/** What a traced function may add to its span. */
export interface SpanHandle {
  setAttributes(attributes: SpanAttributes): void;
  /**
   * The span as a traceparent, to pass as `parent` to its child spans explicitly: they then belong to
   * the trace whether or not a context manager carries the active span across awaits.
   */
  readonly traceparent: string | undefined;
}

/** A span started now and ended by the caller. */
export interface OpenSpan extends SpanHandle {
  end(error?: unknown): void;
}

const NO_SPAN: OpenSpan = { setAttributes: () => undefined, traceparent: undefined, end: () => undefined };

export interface SpanOptions {
  kind?: 'producer' | 'consumer' | 'internal';
  /** A W3C traceparent to continue (an event's `metadata.traceparent`); else the active context. */
  parent?: string | undefined;
  /** Other traceparents the span relates to (the other events of a batch). */
  links?: readonly string[];
  attributes?: SpanAttributes;
}

/** The active span's context as a W3C traceparent, or undefined when there is none. */
export function activeTraceparent(): string | undefined {
  if (!api) return undefined;
  const sc = api.trace.getSpanContext(api.context.active());
  return sc && format(sc);
}

/** An event's `metadata.traceparent` when it is a well-formed W3C traceparent. */
export function traceparentOf(metadata: Record<string, unknown> | null | undefined): string | undefined {
  const tp = metadata?.traceparent;
  return typeof tp === 'string' && TRACEPARENT.test(tp) ? tp : undefined;
}

function spanContextOf(a: Api, traceparent: string): OtelApi.SpanContext | undefined {
  const m = TRACEPARENT.exec(traceparent);
  if (!m) return undefined;
  const sc = { traceId: m[1]!, spanId: m[2]!, traceFlags: parseInt(m[3]!, 16), isRemote: true };
  return a.isSpanContextValid(sc) ? sc : undefined;
}

/**
 * Runs `fn` in a span named `name`: a child of `parent` (or of the active context), ended when `fn`
 * settles, with status error and the exception recorded when it throws.
 */
export function traced<T>(
  name: string,
  options: SpanOptions,
  fn: (span: SpanHandle) => Promise<T>,
): Promise<T> {
  if (!api || !recordable(api, options)) return fn(NO_SPAN);
  const a = api;
  const { span, ctx, handle } = start(a, name, options);
  return a.context.with(a.trace.setSpan(ctx, span), async () => {
    try {
      return await fn(handle);
    } catch (err) {
      failed(a, span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}

/** Starts a span that the caller ends (for a span that begins and ends in different callbacks). */
export function openSpan(name: string, options: SpanOptions): OpenSpan {
  if (!api || !recordable(api, options)) return NO_SPAN;
  const a = api;
  const { span, handle } = start(a, name, options);
  return {
    ...handle,
    end: (error?: unknown) => {
      if (error !== undefined) failed(a, span, error);
      span.end();
    },
  };
}

/**
 * Whether a span started now could be recorded or carry a trace on: a tracer provider is registered,
 * or there is a trace to continue (a parent given or active). Otherwise the span would be a no-op that
 * carries nothing, and starting it (a context switch per append and per batch) is skipped.
 */
function recordable(a: Api, options: SpanOptions): boolean {
  if (options.parent !== undefined || (options.links !== undefined && options.links.length > 0)) return true;
  const provider = a.trace.getTracerProvider();
  if (!(provider instanceof a.ProxyTracerProvider) || provider.getDelegateTracer('idem') !== undefined)
    return true;
  return a.trace.getSpan(a.context.active()) !== undefined;
}

function start(a: Api, name: string, options: SpanOptions) {
  let ctx = a.context.active();
  const parent = options.parent === undefined ? undefined : spanContextOf(a, options.parent);
  if (parent) ctx = a.trace.setSpanContext(ctx, parent);
  const links: OtelApi.Link[] = [];
  for (const tp of options.links ?? []) {
    if (links.length >= MAX_LINKS) break;
    const sc = spanContextOf(a, tp);
    if (sc) links.push({ context: sc });
  }
  const kind =
    options.kind === 'producer'
      ? a.SpanKind.PRODUCER
      : options.kind === 'consumer'
        ? a.SpanKind.CONSUMER
        : a.SpanKind.INTERNAL;
  const span = a.trace
    .getTracer('idem')
    .startSpan(name, { kind, links, ...(options.attributes ? { attributes: options.attributes } : {}) }, ctx);
  const handle: SpanHandle = {
    setAttributes: (attrs) => void span.setAttributes(attrs),
    traceparent: format(span.spanContext()),
  };
  return { span, ctx, handle };
}

function failed(a: Api, span: OtelApi.Span, err: unknown): void {
  span.recordException(err instanceof Error ? err : String(err));
  span.setStatus({ code: a.SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
}

function format(sc: OtelApi.SpanContext): string | undefined {
  if (!api?.isSpanContextValid(sc)) return undefined;
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/** True when spans can be recorded at all (the package is installed). */
export function tracingAvailable(): boolean {
  return api !== null;
}

/**
 * Runs an append in an `idem.append` span (its events record that span as their `traceparent`), with
 * the stream, the count and the positions written as attributes. Without the package: `append()`.
 */
export function traceAppend<R extends { firstPosition: number; lastPosition: number; duplicate: boolean }>(
  stream: string,
  events: number,
  append: () => Promise<R>,
): Promise<R> {
  const options: SpanOptions = {
    kind: 'producer',
    attributes: { 'idem.stream': stream, 'idem.events': events },
  };
  // Checked here as well as in `traced`: an append without a span is the append's own promise, with
  // no wrapper (a promise and its ticks per append).
  if (!api || !recordable(api, options)) return append();
  return traced('idem.append', options, async (span) => {
    const r = await append();
    span.setAttributes({
      'idem.position.first': r.firstPosition,
      'idem.position.last': r.lastPosition,
      'idem.duplicate': r.duplicate,
    });
    return r;
  });
}

/** The number of events an append was given, for its span (0 for input the store will refuse). */
export function eventCount(events: unknown): number {
  return Array.isArray(events) ? events.length : 0;
}
