/**
 * The remote store's appends: those made while the client is busy go together in one
 * `POST /v1/appends` request, each with its own result or error, so that concurrent callers cost
 * the server one request (and share one group commit) instead of one request each.
 */
import type { AppendResult } from '../core/event.js';
import { IdemError } from '../core/errors.js';
import type { ExpectedVersion } from '../core/expectedVersion.js';
import { MAX_APPENDS_PER_REQUEST } from '../core/limits.js';
import { MicrotaskPump } from '../core/microtaskPump.js';
import type { PreparedEvent } from '../core/validation.js';
import { errorFromWire } from './errorFromWire.js';
import type { HttpApi } from './httpApi.js';

/**
 * Append requests out at once. Appends made while this many are out wait, and go together in the
 * next one: the server's store commits one group at a time, so more requests would only queue there.
 */
const MAX_IN_FLIGHT = 2;
/**
 * A request carrying several appends stays within this many characters of JSON (well under the
 * server's default body limit of 8 MiB); an append larger than this goes alone.
 */
const MAX_BATCH_CHARS = 1024 * 1024;

interface Queued {
  stream: string;
  /** `{"events":[...],"expectedVersion":...}`: the body of `POST /v1/streams/:stream/events`. */
  body: string;
  resolve: (result: AppendResult) => void;
  reject: (err: unknown) => void;
}

type Outcome = AppendResult | { error: unknown };

export class AppendCoalescer {
  private queue: Queued[] = [];
  private inFlight = 0;
  /** Sends a microtask after an append: the appends made together travel in the same request. */
  private readonly pumpSoon = new MicrotaskPump(() => this.pump());
  /** False once the server answered that it has no `POST /v1/appends` (an older one): appends then go alone. */
  private batchRoute = true;

  constructor(private readonly http: HttpApi) {}

  /** `events` are validated, with ids assigned and their JSON texts made (`prepareAppend`). */
  append(
    stream: string,
    events: readonly PreparedEvent[],
    expectedVersion: ExpectedVersion,
  ): Promise<AppendResult> {
    return new Promise<AppendResult>((resolve, reject) => {
      this.queue.push({ stream, body: appendBody(events, expectedVersion), resolve, reject });
      this.pumpSoon.schedule();
    });
  }

  private pump(): void {
    while (this.queue.length > 0 && this.inFlight < MAX_IN_FLIGHT) {
      const batch = this.take();
      this.inFlight++;
      void this.send(batch).finally(() => {
        this.inFlight--;
        if (this.queue.length > 0) this.pumpSoon.schedule();
      });
    }
  }

  /** The next request's appends: as many queued ones as the bounds let in (always at least one). */
  private take(): Queued[] {
    let chars = 0;
    let n = 0;
    while (n < this.queue.length && n < MAX_APPENDS_PER_REQUEST) {
      const size = this.queue[n]!.body.length + this.queue[n]!.stream.length + 16;
      if (n > 0 && chars + size > MAX_BATCH_CHARS) break;
      chars += size;
      n++;
    }
    return this.queue.splice(0, n);
  }

  private async send(batch: Queued[]): Promise<void> {
    if (batch.length === 1 || !this.batchRoute) {
      await Promise.all(batch.map((q) => this.sendAlone(q)));
      return;
    }
    let outcomes: Outcome[];
    try {
      outcomes = await this.sendTogether(batch);
    } catch (err) {
      const e = err as IdemError;
      if (e.code === 'not_found' && e.details.what === 'route') this.batchRoute = false;
      else if (!(e.code === 'too_large' && e.details.field === 'body')) {
        for (const q of batch) q.reject(err);
        return;
      }
      // A server without the route, or whose body limit is below this request: one request each.
      await Promise.all(batch.map((q) => this.sendAlone(q)));
      return;
    }
    batch.forEach((q, i) => {
      const o = outcomes[i]!;
      if (typeof o !== 'object' || o === null)
        q.reject(new IdemError('internal', 'the server answered no result'));
      else if ('error' in o) q.reject(errorFromWire(o.error));
      else q.resolve(o);
    });
  }

  private async sendTogether(batch: readonly Queued[]): Promise<Outcome[]> {
    // Each entry is its append's body with the stream put first: no second serialisation of the events.
    const entries = batch.map((q) => `{"stream":${JSON.stringify(q.stream)},${q.body.slice(1)}`);
    // Safe to repeat: every event carries its id, so an append already written answers as a duplicate.
    const r = await this.http.request<{ results?: unknown }>('POST', '/v1/appends', {
      json: `{"appends":[${entries.join(',')}]}`,
      retry: true,
    });
    const results = r?.results;
    if (!Array.isArray(results) || results.length !== batch.length) {
      throw new IdemError(
        'internal',
        `the server answered ${Array.isArray(results) ? results.length : 'no'} results for ${batch.length} appends`,
      );
    }
    return results as Outcome[];
  }

  private async sendAlone(q: Queued): Promise<void> {
    try {
      q.resolve(
        await this.http.request<AppendResult>('POST', `/v1/streams/${encodeURIComponent(q.stream)}/events`, {
          json: q.body,
          retry: true,
        }),
      );
    } catch (err) {
      q.reject(err);
    }
  }
}

/**
 * The body of `POST /v1/streams/:stream/events`, `{"events":[...],"expectedVersion":...}`, put
 * together from the events' JSON texts that `prepareAppend` already made: the data and metadata are
 * not serialised a second time.
 */
export function appendBody(events: readonly PreparedEvent[], expectedVersion: ExpectedVersion): string {
  let json = '{"events":[';
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!;
    if (i > 0) json += ',';
    json += `{"id":"${e.id}","type":${JSON.stringify(e.type)},"data":${e.dataJson},"metadata":${e.metadataJson}}`;
  }
  return `${json}],"expectedVersion":${JSON.stringify(expectedVersion)}}`;
}
