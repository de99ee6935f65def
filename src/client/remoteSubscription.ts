/**
 * A durable subscription held over one WebSocket to `/v1/subscribe` (protocol in docs/protocol.md).
 * Losing the connection ends iteration with an `unavailable` error (the server releases the lease);
 * the caller, e.g. the consumer runtime, subscribes again and resumes from the acknowledged cursor.
 */
import WebSocket, { type RawData } from 'ws';
import { ClosedError, IdemError } from '../core/errors.js';
import { normalizeFilter } from '../core/filter.js';
import { checkKnownKeys } from '../core/knownKeys.js';
import {
  SUBSCRIBE_OPTION_KEYS,
  type FailureInfo,
  type ParkInfo,
  type ParkResult,
  type SubscribeOptions,
  type Subscription,
  type SubscriptionMessage,
} from '../core/subscription.js';
import { SUBSCRIBE_BOUNDS } from '../core/limits.js';
import { boundedInt, validateConsumerName, validatePosition } from '../core/validation.js';
import type { ConsumerMonitors } from '../core/consumerMonitors.js';
import type { ClientMessage, OkMessage, ServerMessage, SubscribeRequest } from '../core/protocol.js';
import type { UpcastEvents } from '../core/upcasters.js';
import { errorFromWire } from './errorFromWire.js';

type Pending = { resolve: (reply: OkMessage) => void; reject: (err: Error) => void };
/** A request as built here; `request` adds its `req`. */
type WithoutReq<T> = T extends unknown ? Omit<T, 'req'> : never;

const SUB = 's1';

export interface RemoteSubscribeContext {
  wsUrl: string;
  headers: Record<string, string>;
  /** Called when the subscription ends, so the store can forget it. */
  onEnd: (sub: RemoteSubscription) => void;
  /** The client's upcasters, applied to delivered events. */
  upcast?: UpcastEvents | null;
}

/** Opens a WebSocket, subscribes, and resolves once the server reports ownership (or rejects with its error). */
export async function openRemoteSubscription(
  ctx: RemoteSubscribeContext,
  consumer: string,
  options: SubscribeOptions = {},
): Promise<RemoteSubscription> {
  validateConsumerName(consumer);
  checkKnownKeys(options, SUBSCRIBE_OPTION_KEYS, 'options');
  const filter = normalizeFilter(options.filter);
  const from = options.from;
  if (from !== undefined && from !== 'start' && from !== 'end') validatePosition(from, 'from');
  for (const key of ['maxInFlight', 'batchSize', 'leaseTtlMs'] as const) {
    boundedInt(options[key], key, SUBSCRIBE_BOUNDS[key].min, SUBSCRIBE_BOUNDS[key].max, 0);
  }
  if (options.signal?.aborted) throw new ClosedError(`subscription of consumer "${consumer}"`);
  const request: SubscribeRequest = { type: 'subscribe', sub: SUB, consumer, filter, credit: 0, req: 0 };
  if (from !== undefined) request.from = from;
  if (options.standby !== undefined) request.standby = options.standby;
  if (options.maxInFlight !== undefined) request.maxInFlight = options.maxInFlight;
  if (options.batchSize !== undefined) request.batchSize = options.batchSize;
  if (options.leaseTtlMs !== undefined) request.leaseTtlMs = options.leaseTtlMs;
  if (options.owner !== undefined) request.owner = options.owner;

  const socket = new WebSocket(ctx.wsUrl, { headers: ctx.headers, maxPayload: 1024 * 1024 * 1024 });
  let heartbeatMs = 3000;
  return new Promise<RemoteSubscription>((resolve, reject) => {
    let settled = false;
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      options.signal?.removeEventListener('abort', onAbort);
      socket.removeAllListeners('message');
      socket.on('error', () => undefined);
      socket.terminate();
      reject(err);
    };
    // As with an embedded store: an aborted (standby) subscribe ends with `closed`.
    const onAbort = (): void => fail(new ClosedError(`subscription of consumer "${consumer}"`));
    options.signal?.addEventListener('abort', onAbort, { once: true });
    socket.on('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => {
        let wire: unknown;
        try {
          wire = (JSON.parse(body) as { error?: unknown }).error;
        } catch {
          wire = undefined;
        }
        fail(errorFromWire(wire, res.statusCode));
      });
      res.on('error', (err) => fail(err));
    });
    socket.on('error', (err) =>
      fail(new IdemError('unavailable', `WebSocket ${ctx.wsUrl}: ${err.message}`, {}, { cause: err })),
    );
    socket.on('close', () =>
      fail(new IdemError('unavailable', `WebSocket ${ctx.wsUrl} closed before the subscription started`)),
    );
    socket.on('open', () => socket.send(JSON.stringify(request)));
    socket.on('message', (data) => {
      let msg: ServerMessage;
      try {
        msg = JSON.parse(rawText(data)) as ServerMessage;
      } catch {
        fail(new IdemError('internal', 'server sent a message that is not JSON'));
        return;
      }
      if (msg.type === 'hello') {
        heartbeatMs =
          typeof msg.heartbeatMs === 'number' && msg.heartbeatMs > 0 ? msg.heartbeatMs : heartbeatMs;
        return;
      }
      if (msg.type === 'error' && (msg.sub === SUB || msg.req === 0 || msg.sub === undefined)) {
        fail(errorFromWire(msg.error));
        return;
      }
      if (msg.type === 'subscribed' && msg.sub === SUB) {
        settled = true;
        options.signal?.removeEventListener('abort', onAbort);
        socket.removeAllListeners();
        // Three missed heartbeats (at least 5 s) mean a dead connection.
        const silenceMs = Math.max(5000, 3 * heartbeatMs);
        resolve(
          new RemoteSubscription(
            socket,
            ctx,
            msg.consumer,
            msg.epoch,
            msg.position,
            options.signal,
            silenceMs,
          ),
        );
      }
    });
  });
}

export class RemoteSubscription implements Subscription {
  private readonly queue: SubscriptionMessage[] = [];
  private wake: (() => void) | null = null;
  private ended = false;
  private endError: Error | null = null;
  /** The server's last error about this subscription (e.g. fenced), reported when it is closed. */
  private serverError: Error | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextReq = 1;
  private closing: Promise<void> | null = null;
  /** A `more` was sent and its message has not arrived yet. */
  private asked = false;
  /** The highest position delivered so far (normal batches and redeliveries). */
  private lastDelivered = 0;
  private lastSeen = Date.now();
  private readonly watchdog: NodeJS.Timeout;
  private removeAbort: () => void = () => undefined;
  private readonly socketClosed: Promise<void>;

  constructor(
    private readonly socket: WebSocket,
    private readonly ctx: RemoteSubscribeContext,
    readonly consumer: string,
    readonly epoch: number,
    readonly startPosition: number,
    signal: AbortSignal | undefined,
    silenceMs: number,
  ) {
    this.socketClosed = new Promise((resolve) => socket.once('close', () => resolve()));
    socket.on('message', (data) => this.onMessage(rawText(data)));
    socket.on('ping', () => (this.lastSeen = Date.now()));
    socket.on('error', () => socket.terminate());
    socket.on('close', () => this.onSocketClose());
    // The server sends a heartbeat every few seconds; a much longer silence means a dead connection.
    this.watchdog = setInterval(
      () => {
        if (Date.now() - this.lastSeen > silenceMs) socket.terminate();
      },
      Math.min(2_000, silenceMs / 2),
    );
    this.watchdog.unref();
    if (signal) {
      const onAbort = (): void => void this.close();
      signal.addEventListener('abort', onAbort, { once: true });
      // A long-lived signal (a consumer's stop signal) outlives many subscriptions: drop ours at the end.
      this.removeAbort = () => signal.removeEventListener('abort', onAbort);
    }
  }

  async ack(position: number): Promise<void> {
    validatePosition(position, 'position');
    const acked = this.request({ type: 'ack', sub: SUB, position });
    // An ack of everything delivered leaves nothing that a later park could hold back, so the next
    // message can be asked for now, behind the ack on the same socket (the server applies the ack
    // first): the server reads and sends it while this side waits for the ack's reply, which saves a
    // round trip per batch. Otherwise the iterator asks when it is called, as before.
    if (position >= this.lastDelivered) this.askForMore();
    await acked;
  }

  async park(position: number, info: ParkInfo): Promise<ParkResult> {
    validatePosition(position, 'position');
    const reply = await this.request({ type: 'park', sub: SUB, position, info: wireInfo(info) as ParkInfo });
    // A server without `parkedThrough` in its reply: the events this side has been sent by now are
    // all it can have delivered before the park.
    return { parkedThrough: reply.parkedThrough ?? Math.max(position, this.lastDelivered) };
  }

  async outage(active: boolean): Promise<void> {
    await this.request({ type: 'outage', sub: SUB, active });
  }

  async fail(info: FailureInfo): Promise<void> {
    await this.request({ type: 'fail', sub: SUB, info: wireInfo(info) as FailureInfo });
  }

  report(monitors: ConsumerMonitors): void {
    if (this.ended || this.closing || this.socket.readyState !== WebSocket.OPEN) return;
    this.socket.send(JSON.stringify({ type: 'report', sub: SUB, monitors } satisfies ClientMessage));
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.wake?.();
      this.wake = null;
      if (this.socket.readyState === WebSocket.OPEN) {
        const unsubscribed = this.request({ type: 'unsubscribe', sub: SUB }).catch(() => undefined);
        await Promise.race([unsubscribed, this.socketClosed, timeout(5_000)]);
        this.socket.close(1000);
      }
      await Promise.race([this.socketClosed, timeout(5_000)]);
      if (this.socket.readyState !== WebSocket.CLOSED) this.socket.terminate();
      this.finish(null);
    })();
    return this.closing;
  }

  [Symbol.asyncIterator](): AsyncIterator<SubscriptionMessage> {
    return {
      next: async (): Promise<IteratorResult<SubscriptionMessage>> => {
        for (;;) {
          if (this.closing) return { value: undefined, done: true };
          const m = this.queue.shift();
          if (m) return { value: m, done: false };
          if (this.ended) {
            if (this.endError) throw this.endError;
            return { value: undefined, done: true };
          }
          // Pull mode: ask for one message only when the caller wants one, as an embedded subscription
          // reads the store only when iterated (so a park is applied before the next batch is read).
          this.askForMore();
          await new Promise<void>((resolve) => (this.wake = resolve));
        }
      },
      return: async (): Promise<IteratorResult<SubscriptionMessage>> => {
        await this.close();
        return { value: undefined, done: true };
      },
    };
  }

  /** Grants the server one more message, unless one is already asked for or buffered. */
  private askForMore(): void {
    if (this.asked || this.queue.length > 0 || this.ended || this.closing) return;
    if (this.socket.readyState !== WebSocket.OPEN) return;
    this.asked = true;
    this.socket.send(JSON.stringify({ type: 'more', sub: SUB, messages: 1 } satisfies ClientMessage));
  }

  private request(msg: WithoutReq<ClientMessage>): Promise<OkMessage> {
    if (this.closing && msg.type !== 'unsubscribe') return Promise.reject(new ClosedError('subscription'));
    if (this.ended || this.socket.readyState !== WebSocket.OPEN) {
      return Promise.reject(this.endError ?? new ClosedError('subscription'));
    }
    const req = this.nextReq++;
    return new Promise<OkMessage>((resolve, reject) => {
      this.pending.set(req, { resolve, reject });
      this.socket.send(JSON.stringify({ ...msg, req }));
    });
  }

  private onMessage(text: string): void {
    this.lastSeen = Date.now();
    let msg: ServerMessage;
    try {
      msg = JSON.parse(text) as ServerMessage;
    } catch {
      return;
    }
    switch (msg.type) {
      case 'events':
        for (const e of msg.events) if (e.position > this.lastDelivered) this.lastDelivered = e.position;
        try {
          this.ctx.upcast?.(msg.events);
        } catch (err) {
          // A failing upcaster ends iteration with its error, as a failing read of a store does.
          this.finish(err instanceof Error ? err : new Error(String(err)));
          this.socket.close(1000);
          return;
        }
        this.push({ kind: 'events', events: msg.events, redelivery: msg.redelivery });
        return;
      case 'caught_up':
        this.push({ kind: 'caught_up', position: msg.position });
        return;
      case 'paused':
        this.push({ kind: 'paused', pause: msg.pause });
        return;
      case 'ok':
        if (typeof msg.req === 'number') this.settle(msg.req, msg);
        return;
      case 'error': {
        const err = errorFromWire(msg.error);
        if (typeof msg.req === 'number' && this.pending.has(msg.req)) this.settle(msg.req, err);
        else this.serverError = err;
        return;
      }
      case 'closed': {
        // `fenced` or another error ends iteration with that error; an ordinary close just ends it.
        let err: Error | null;
        if (this.serverError) err = this.serverError;
        else if (msg.reason === 'shutdown')
          err = this.closing ? null : new IdemError('unavailable', 'the server is shutting down');
        else if (msg.reason === 'unsubscribed' || msg.reason === 'closed' || msg.reason === 'failed')
          err = null;
        else err = new IdemError('unavailable', `subscription closed by the server: ${msg.reason}`);
        this.finish(err);
        this.socket.close(1000);
        return;
      }
      default:
        return;
    }
  }

  private onSocketClose(): void {
    clearInterval(this.watchdog);
    this.removeAbort();
    const lost = this.closing ? null : new IdemError('unavailable', `connection to ${this.ctx.wsUrl} lost`);
    for (const [req, p] of this.pending) {
      this.pending.delete(req);
      p.reject(this.endError ?? lost ?? new ClosedError('subscription'));
    }
    this.finish(lost);
  }

  private settle(req: number, outcome: OkMessage | Error): void {
    const p = this.pending.get(req);
    if (!p) return;
    this.pending.delete(req);
    if (outcome instanceof Error) p.reject(outcome);
    else p.resolve(outcome);
  }

  private push(m: SubscriptionMessage): void {
    this.asked = false;
    if (this.ended) return;
    this.queue.push(m);
    this.wake?.();
    this.wake = null;
  }

  private finish(err: Error | null): void {
    if (this.ended) return;
    this.ended = true;
    this.endError = err;
    this.ctx.onEnd(this);
    this.wake?.();
    this.wake = null;
  }
}

/**
 * The info object as JSON will carry it: an `Error` in `error` keeps its name, message and stack
 * (which JSON.stringify would drop, as they are not own enumerable properties). Anything else is sent
 * as is, for the server to check and name the offending field.
 */
function wireInfo(info: unknown): unknown {
  if (info === null || typeof info !== 'object') return info;
  const out: Record<string, unknown> = { ...(info as Record<string, unknown>) };
  const e = out.error;
  if (e !== null && typeof e === 'object') {
    const err = e as { name?: unknown; message?: unknown; stack?: unknown };
    const plain: Record<string, unknown> = { ...(e as Record<string, unknown>) };
    for (const key of ['name', 'message', 'stack'] as const)
      if (err[key] !== undefined) plain[key] = err[key];
    out.error = plain;
  }
  return out;
}

function timeout(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  if (data instanceof ArrayBuffer) return Buffer.from(data).toString('utf8');
  return data.toString('utf8');
}
