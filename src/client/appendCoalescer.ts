/**
 * The remote store's appends: those made while the client is busy go together in one frame on the
 * append WebSocket (`/v1/appends/ws`), or in one `POST /v1/appends` request when the server does not
 * offer the socket, each with its own result or error, so that concurrent callers cost the server one
 * message (and share one group commit) instead of one each.
 */
import type { AppendResult } from '../core/event.js';
import { IdemError } from '../core/errors.js';
import type { ExpectedVersion } from '../core/expectedVersion.js';
import { MAX_APPENDS_PER_REQUEST } from '../core/limits.js';
import { MicrotaskPump } from '../core/microtaskPump.js';
import type { PreparedEvent } from '../core/validation.js';
import type { AppendSocketLink } from './appendSocketLink.js';
import { AppendSocketLost, NoAppendSocket, type Outcome } from './appendSocket.js';
import { errorFromWire } from './errorFromWire.js';
import { delay, type HttpApi } from './httpApi.js';

/**
 * Append requests (or frames) out at once. Appends made while this many are out wait, and go together
 * in the next one: the server's store commits one group at a time, so more would only queue there.
 */
const MAX_IN_FLIGHT = 2;
/**
 * A request carrying several appends stays within this many characters of JSON (well under the
 * server's default body limit of 8 MiB); an append larger than this goes alone.
 */
const MAX_BATCH_CHARS = 1024 * 1024;

/** Bytes of an append frame around its entries (`{"type":"appends","req":…,"appends":[…]}`), and some. */
const FRAME_OVERHEAD = 64;

interface Queued {
  stream: string;
  /** `{"events":[...],"expectedVersion":...}`: the body of `POST /v1/streams/:stream/events`. */
  body: string;
  resolve: (result: AppendResult) => void;
  reject: (err: unknown) => void;
}

export class AppendCoalescer {
  private queue: Queued[] = [];
  private inFlight = 0;
  /** Sends a microtask after an append: the appends made together travel in the same request. */
  private readonly pumpSoon = new MicrotaskPump(() => this.pump());
  /** False once the server answered that it has no `POST /v1/appends` (an older one): appends then go alone. */
  private batchRoute = true;

  /** `socket`: the append WebSocket, or null to send every append over HTTP. */
  constructor(
    private readonly http: HttpApi,
    private readonly socket: AppendSocketLink | null,
  ) {}

  /** Closes the append socket, if one is open. */
  close(): void {
    this.socket?.close();
  }

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
    if (this.socket?.offered && (await this.sendOverSocket(batch))) return;
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
    settle(batch, outcomes);
  }

  /**
   * Sends the batch as one frame on the append socket, again on a new socket after a network failure
   * (as an HTTP append is retried: every event carries its id, so an append already written answers
   * as a duplicate), and settles every append. False when the batch must go over HTTP instead: the
   * server offers no socket, or the frame is larger than it reads.
   */
  private async sendOverSocket(batch: Queued[]): Promise<boolean> {
    const entries = entriesJson(batch);
    /** A frame of this batch went out on a socket that was then lost: it may have been written. */
    let sent = false;
    for (let attempt = 1; ; attempt++) {
      try {
        const socket = await this.socket!.get();
        // Counted in characters first (at most 3 bytes each): the bytes only for a large frame.
        const tooLarge =
          entries.length * 3 + FRAME_OVERHEAD > socket.maxMessageBytes &&
          Buffer.byteLength(entries) + FRAME_OVERHEAD > socket.maxMessageBytes;
        if (tooLarge || batch.length > socket.maxAppends) return false;
        settle(batch, await socket.request(entries, batch.length));
        return true;
      } catch (err) {
        if (err instanceof NoAppendSocket) return false;
        if (err instanceof AppendSocketLost) {
          sent ||= err.sent;
          if (attempt < this.http.attempts) {
            await delay(100 * 3 ** (attempt - 1));
            continue;
          }
          const e = new IdemError(
            'unavailable',
            sent
              ? `${err.message}: the appends may or may not have been written; sending them again is safe (their events carry ids)`
              : `${err.message}: the appends were not sent`,
            { url: this.socket!.url },
            { cause: err },
          );
          for (const q of batch) q.reject(e);
          return true;
        }
        for (const q of batch) q.reject(err);
        return true;
      }
    }
  }

  private async sendTogether(batch: readonly Queued[]): Promise<Outcome[]> {
    // Safe to repeat: every event carries its id, so an append already written answers as a duplicate.
    const r = await this.http.request<{ results?: unknown }>('POST', '/v1/appends', {
      json: `{"appends":[${entriesJson(batch)}]}`,
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

/** The outcomes, in the batch's order, to each caller. */
function settle(batch: readonly Queued[], outcomes: readonly Outcome[]): void {
  batch.forEach((q, i) => {
    const o = outcomes[i];
    if (typeof o !== 'object' || o === null)
      q.reject(new IdemError('internal', 'the server answered no result'));
    else if ('error' in o) q.reject(errorFromWire(o.error));
    else q.resolve(o);
  });
}

/**
 * The appends as entries of `POST /v1/appends` (and of an append frame), joined by commas: each its
 * append's body with the stream put first, so the events are not serialised a second time.
 */
function entriesJson(batch: readonly Queued[]): string {
  let json = '';
  for (let i = 0; i < batch.length; i++) {
    const q = batch[i]!;
    if (i > 0) json += ',';
    json += `{"stream":${JSON.stringify(q.stream)},${q.body.slice(1)}`;
  }
  return json;
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
