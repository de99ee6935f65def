/**
 * One WebSocket connection on `/v1/subscribe`: it holds up to `maxSubscriptions` store subscriptions,
 * forwards their batches with back-pressure, and relays acks, parks and failures. Closing the socket
 * closes its subscriptions (releasing their leases at once); a socket from which no frame arrives for
 * `silenceMs` is closed at that moment.
 */
import type { WebSocket, RawData } from 'ws';
import { IdemError, InvalidInputError } from '../core/errors.js';
import type { EventStore } from '../core/eventStore.js';
import { normalizeFilter } from '../core/filter.js';
import type { ParkResult, SubscribeOptions, Subscription } from '../core/subscription.js';
import { validateFailureInfo } from '../core/parkInfo.js';
import { errorFor, requireFilterWithin, requireScope } from './access.js';
import { toIdemError, wireError } from './httpErrors.js';
import { nestsDeeperThan } from './jsonDepth.js';
import type { ServerMetrics } from './metrics.js';
import { byteLength, rawText } from './wsFrames.js';
import {
  PROTOCOL_VERSION,
  REPORT_INTERVAL_MS,
  type ClientMessage,
  type RequestId,
  type ServerMessage,
  type SubscribeRequest,
} from '../core/protocol.js';
import { clientMessageSchema, parseWith } from './schemas.js';
import type { Principal } from './tokens.js';

export interface ConnectionContext {
  store: EventStore;
  metrics: ServerMetrics;
  maxSubscriptions: number;
  /** Largest frame from the client, in bytes; a larger one closes the connection (1009). */
  maxMessageBytes: number;
  /** Bytes queued for the client, beyond the event frames in flight, at which the connection is closed (1008). */
  maxSendBufferBytes: number;
  heartbeatMs: number;
  silenceMs: number;
  /** Called for errors that are not the client's fault. */
  logError: (err: unknown, msg: string) => void;
}

interface ActiveSub {
  id: string;
  consumer: string;
  abort: AbortController;
  subscription: Subscription | null;
  /** Operations on this subscription run one after another, in the order the client sent them. */
  chain: Promise<unknown>;
  pump: Promise<void> | null;
  endReason: string | null;
  /** Messages the client still allows (pull mode); Infinity when it did not ask for pull mode. */
  credit: number;
  /** Wakes a pump waiting for credit (or for the end). */
  wakePump: (() => void) | null;
  /** When the last `report` kept was received (ms), for its rate bound. */
  lastReport: number;
}

export class SubscriptionConnection {
  private readonly subs = new Map<string, ActiveSub>();
  /** When the last frame (message, ping or pong) arrived from the client. */
  private lastSeen = Date.now();
  private readonly timer: NodeJS.Timeout;
  private silenceTimer: NodeJS.Timeout;
  /** The socket is gone: nothing more is sent. */
  private closed = false;
  private stopping: Promise<void> | null = null;
  /** Bytes of event frames handed to the socket and not yet written: each pump waits for its own. */
  private framesInFlight = 0;
  readonly done: Promise<void>;
  private resolveDone!: () => void;

  constructor(
    private readonly socket: WebSocket,
    private readonly principal: Principal,
    private readonly ctx: ConnectionContext,
    private readonly peer: string,
  ) {
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
    ctx.metrics.wsConnections.inc();
    socket.on('message', (data, isBinary) => this.onMessage(data, isBinary));
    socket.on('pong', () => (this.lastSeen = Date.now()));
    socket.on('ping', () => (this.lastSeen = Date.now()));
    socket.on('close', () => void this.onSocketClosed());
    socket.on('error', () => socket.terminate());
    this.timer = setInterval(() => this.beat(), ctx.heartbeatMs);
    this.timer.unref();
    this.silenceTimer = this.armSilenceTimer(ctx.silenceMs);
    this.send({
      type: 'hello',
      protocol: PROTOCOL_VERSION,
      heartbeatMs: ctx.heartbeatMs,
      silenceMs: ctx.silenceMs,
      maxSubscriptions: ctx.maxSubscriptions,
    });
  }

  /** Graceful stop (server shutdown): finish queued acks, close every subscription, then the socket. */
  shutdown(): Promise<void> {
    this.stopping ??= (async () => {
      await Promise.all([...this.subs.values()].map((a) => this.endSub(a, 'shutdown')));
      if (!this.closed) this.socket.close(1001, 'server shutting down');
      await this.onSocketClosed();
    })();
    return this.stopping;
  }

  private beat(): void {
    if (this.closed) return;
    this.socket.ping();
    this.send({ type: 'heartbeat', time: new Date().toISOString() });
  }

  /**
   * Fires `silenceMs` after the last frame from the client, not on the next heartbeat, so a silent
   * peer (a half-open connection, a client that stopped reading) loses its leases exactly then.
   * Frames only move `lastSeen`; the timer re-arms itself for the time that remains.
   */
  private armSilenceTimer(delayMs: number): NodeJS.Timeout {
    const timer = setTimeout(() => {
      if (this.closed) return;
      const left = this.lastSeen + this.ctx.silenceMs - Date.now();
      if (left > 0) {
        this.silenceTimer = this.armSilenceTimer(left);
        return;
      }
      // Dropping the socket closes its subscriptions and frees their leases.
      this.socket.terminate();
    }, delayMs);
    timer.unref();
    return timer;
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    this.lastSeen = Date.now();
    if (this.closed || this.stopping || this.socket.readyState !== this.socket.OPEN) return;
    // The WebSocket server's own bound is the larger one of the append socket's.
    if (byteLength(data) > this.ctx.maxMessageBytes) {
      this.socket.close(1009, `message too big: at most ${this.ctx.maxMessageBytes} bytes`);
      return;
    }
    let raw: unknown;
    try {
      if (isBinary) throw new InvalidInputError('message', 'must be a text frame holding JSON');
      try {
        raw = JSON.parse(rawText(data));
      } catch {
        throw new InvalidInputError('message', 'must be valid JSON');
      }
      if (nestsDeeperThan(raw, 32))
        throw new InvalidInputError('message', 'must not nest deeper than 32 levels');
      const msg = parseWith(clientMessageSchema, raw, '', 'message') as ClientMessage;
      this.dispatch(msg);
    } catch (err) {
      const req = requestIdOf(raw);
      this.sendError(err, req, undefined);
    }
  }

  private dispatch(msg: ClientMessage): void {
    switch (msg.type) {
      case 'ping':
        this.send(msg.req === undefined ? { type: 'pong' } : { type: 'pong', req: msg.req });
        return;
      case 'subscribe':
        this.subscribe(msg);
        return;
      case 'more': {
        const a = this.subs.get(msg.sub);
        if (!a) throw new InvalidInputError('sub', `no subscription "${msg.sub}" on this connection`);
        a.credit += msg.messages;
        this.wake(a);
        return;
      }
      case 'ack':
        this.onSub(msg.sub, msg.req, (s) => {
          this.ctx.metrics.wsAcks.inc();
          return s.ack(msg.position);
        });
        return;
      case 'park':
        // The reply says which delivered events of the stream were parked behind it (`parkedThrough`).
        this.onSub(msg.sub, msg.req, (s) => s.park(msg.position, msg.info));
        return;
      case 'outage':
        this.onSub(msg.sub, msg.req, (s) => s.outage(msg.active));
        return;
      case 'fail':
        this.onSub(msg.sub, msg.req, async (s, a) => {
          // Checked first: a refused fail leaves the subscription running, so it must not mark its end.
          validateFailureInfo(msg.info);
          a.endReason = 'failed';
          await s.fail(msg.info);
          // `closed` goes out before the `ok`, as for `unsubscribe`.
          this.wake(a);
          await a.pump;
        });
        return;
      case 'report': {
        // Only the owner of a subscription reports for its consumer, so no client speaks for another's.
        const a = this.subs.get(msg.sub);
        if (!a?.subscription)
          throw new InvalidInputError('sub', `no established subscription "${msg.sub}" on this connection`);
        const now = Date.now();
        if (now - a.lastReport < REPORT_INTERVAL_MS) return;
        a.lastReport = now;
        this.ctx.metrics.reports.record(a.subscription.consumer, msg.monitors);
        return;
      }
      case 'unsubscribe': {
        const a = this.subs.get(msg.sub);
        if (!a) {
          this.sendError(
            new InvalidInputError('sub', `no subscription "${msg.sub}" on this connection`),
            msg.req,
            msg.sub,
          );
          return;
        }
        this.endSub(a, 'unsubscribed').then(
          () => this.reply(msg.req, msg.sub),
          (err: unknown) => this.sendError(err, msg.req, msg.sub),
        );
        return;
      }
    }
  }

  private subscribe(msg: SubscribeRequest): void {
    requireScope(this.principal, 'subscribe');
    const filter = normalizeFilter(msg.filter);
    requireFilterWithin(this.principal, filter, 'a subscription');
    if (this.subs.has(msg.sub))
      throw new InvalidInputError('sub', `"${msg.sub}" is already in use on this connection`);
    if (this.subs.size >= this.ctx.maxSubscriptions) {
      throw new IdemError(
        'rate_limited',
        `at most ${this.ctx.maxSubscriptions} subscriptions per connection`,
        {
          limit: this.ctx.maxSubscriptions,
        },
      );
    }
    const a: ActiveSub = {
      id: msg.sub,
      consumer: msg.consumer,
      abort: new AbortController(),
      subscription: null,
      chain: Promise.resolve(),
      pump: null,
      endReason: null,
      credit: msg.credit ?? Number.POSITIVE_INFINITY,
      wakePump: null,
      lastReport: 0,
    };
    this.subs.set(a.id, a);
    this.ctx.metrics.wsSubscriptions.inc();
    // The engine checks every option and names the field; unknown values pass through to it as sent.
    const options = {
      filter,
      signal: a.abort.signal,
      owner: msg.owner ?? `${this.peer} (${this.principal.name})`,
      from: msg.from,
      standby: msg.standby,
      maxInFlight: msg.maxInFlight,
      batchSize: msg.batchSize,
      leaseTtlMs: msg.leaseTtlMs,
    } as SubscribeOptions;
    a.chain = (async () => {
      let s: Subscription;
      try {
        s = await this.ctx.store.subscribe(msg.consumer, options);
      } catch (err) {
        this.forget(a);
        if (a.endReason !== null) this.send({ type: 'closed', sub: a.id, reason: a.endReason });
        else this.sendError(err, msg.req, a.id);
        return;
      }
      if (this.closed || a.endReason !== null) {
        this.forget(a);
        await s.close();
        return;
      }
      a.subscription = s;
      this.send({
        type: 'subscribed',
        sub: a.id,
        consumer: s.consumer,
        epoch: s.epoch,
        position: s.startPosition,
        req: msg.req,
      });
      a.pump = this.pump(a, s);
    })();
  }

  /**
   * Forwards the subscription's messages. The next message is pulled from the engine only when the
   * client has credit and the previous frame was written, so a slow or pausing client slows delivery
   * (and events are read from the store only when they can be sent) instead of buffering without bound.
   */
  private async pump(a: ActiveSub, s: Subscription): Promise<void> {
    let reason = 'closed';
    const it = s[Symbol.asyncIterator]();
    try {
      for (;;) {
        while (a.credit <= 0 && a.endReason === null && !this.closed) {
          await new Promise<void>((resolve) => (a.wakePump = resolve));
        }
        if (a.endReason !== null || this.closed) break;
        const r = await it.next();
        if (r.done) break;
        const m = r.value;
        a.credit--;
        if (m.kind === 'events') {
          await this.sendAsync({ type: 'events', sub: a.id, events: m.events, redelivery: m.redelivery });
          this.ctx.metrics.wsEventsSent.inc(m.events.length);
        } else if (m.kind === 'caught_up') {
          await this.sendAsync({ type: 'caught_up', sub: a.id, position: m.position });
        } else {
          await this.sendAsync({ type: 'paused', sub: a.id, pause: m.pause });
        }
      }
      reason = a.endReason ?? 'closed';
    } catch (err) {
      const e = toIdemError(err, 0);
      if (!e) this.ctx.logError(err, 'subscription delivery failed');
      reason = a.endReason ?? e?.code ?? 'internal';
      if (!this.closed && a.endReason === null) this.sendError(err, undefined, a.id);
    } finally {
      this.forget(a);
      if (!this.closed) this.send({ type: 'closed', sub: a.id, reason });
      await s.close().catch(() => undefined);
    }
  }

  private wake(a: ActiveSub): void {
    const w = a.wakePump;
    a.wakePump = null;
    w?.();
  }

  /** Runs `op` on an established subscription after the operations queued before it, then replies. */
  private onSub(
    sub: string,
    req: RequestId,
    op: (s: Subscription, a: ActiveSub) => Promise<ParkResult | void>,
  ): void {
    const a = this.subs.get(sub);
    if (!a) {
      this.sendError(new InvalidInputError('sub', `no subscription "${sub}" on this connection`), req, sub);
      return;
    }
    const run = a.chain.then(async () => {
      if (!a.subscription) throw new InvalidInputError('sub', `subscription "${sub}" is not established`);
      return op(a.subscription, a);
    });
    a.chain = run.catch(() => undefined);
    run.then(
      (result) => this.reply(req, sub, result),
      (err: unknown) => this.sendError(err, req, sub),
    );
  }

  /** Ends one subscription: waits for its queued operations, then closes it (or stops its standby wait). */
  private async endSub(a: ActiveSub, reason: string): Promise<void> {
    a.endReason ??= reason;
    this.wake(a);
    if (!a.subscription) {
      a.abort.abort();
      await a.chain.catch(() => undefined);
    }
    await a.chain.catch(() => undefined);
    if (a.subscription) await a.subscription.close();
    await a.pump;
  }

  private forget(a: ActiveSub): void {
    if (this.subs.get(a.id) === a) {
      this.subs.delete(a.id);
      this.ctx.metrics.wsSubscriptions.dec();
    }
  }

  private async onSocketClosed(): Promise<void> {
    if (this.closed) return this.done;
    this.closed = true;
    clearInterval(this.timer);
    clearTimeout(this.silenceTimer);
    this.ctx.metrics.wsConnections.dec();
    // The peer is gone: release every lease now rather than after the TTL.
    await Promise.all(
      [...this.subs.values()].map(async (a) => {
        a.endReason ??= 'disconnected';
        this.wake(a);
        if (a.subscription)
          await a.subscription
            .close()
            .catch((err: unknown) => this.ctx.logError(err, 'closing a subscription failed'));
        else a.abort.abort();
        await a.chain.catch(() => undefined);
        await a.pump;
      }),
    );
    this.resolveDone();
  }

  private reply(req: RequestId, sub: string, result?: ParkResult | void): void {
    this.send(
      result ? { type: 'ok', req, sub, parkedThrough: result.parkedThrough } : { type: 'ok', req, sub },
    );
  }

  private sendError(err: unknown, req: RequestId | undefined, sub: string | undefined): void {
    let e = toIdemError(err, 0);
    if (!e) {
      this.ctx.logError(err, 'subscription request failed');
      e = new IdemError('internal', 'internal error');
    }
    e = errorFor(this.principal, e);
    const msg: ServerMessage = { type: 'error', error: wireError(e) };
    if (req !== undefined) msg.req = req;
    if (sub !== undefined) msg.sub = sub;
    this.send(msg);
  }

  private send(msg: ServerMessage): void {
    if (this.closed || this.socket.readyState !== this.socket.OPEN) return;
    this.socket.send(JSON.stringify(msg));
    this.checkSendBuffer();
  }

  /** Sends an event frame and resolves once it is written: the pump's back-pressure. */
  private sendAsync(msg: ServerMessage): Promise<void> {
    if (this.closed || this.socket.readyState !== this.socket.OPEN)
      return Promise.reject(new IdemError('closed', 'connection is closed'));
    const text = JSON.stringify(msg);
    const bytes = Buffer.byteLength(text);
    this.framesInFlight += bytes;
    return new Promise((resolve, reject) =>
      this.socket.send(text, (err) => {
        this.framesInFlight -= bytes;
        if (err) reject(err);
        else resolve();
      }),
    );
  }

  /**
   * Replies are not flow-controlled (every request gets one), so a client that sends requests and
   * never reads would make the server buffer replies without end. Past the limit the connection is
   * closed with 1008; the close frame waits behind the unread data, so a client that still does not
   * read is dropped after `silenceMs`.
   */
  private checkSendBuffer(): void {
    const queued = this.socket.bufferedAmount - this.framesInFlight;
    if (queued <= this.ctx.maxSendBufferBytes) return;
    this.socket.close(1008, 'send buffer limit: the client does not read its messages');
    setTimeout(() => this.socket.terminate(), this.ctx.silenceMs).unref();
  }
}

function requestIdOf(raw: unknown): RequestId | undefined {
  if (raw === null || typeof raw !== 'object') return undefined;
  const req = (raw as { req?: unknown }).req;
  return typeof req === 'string' || typeof req === 'number' ? req : undefined;
}
