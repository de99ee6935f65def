/**
 * One WebSocket connection on `/v1/appends/ws`: each `appends` frame is written as `POST /v1/appends`
 * writes its body (`appendEach`) and answered with its `results`, matched by `req`. The socket saves
 * the client an HTTP request and reply per group of appends. A frame that is not a request closes
 * the connection; a silent one is closed after `silenceMs`.
 */
import type { RawData, WebSocket } from 'ws';
import { z } from 'zod';
import { APPEND_CLOSE, APPEND_FRAMES_AHEAD, type AppendServerMessage } from '../core/appendProtocol.js';
import { IdemError, InvalidInputError } from '../core/errors.js';
import { MAX_APPENDS_PER_REQUEST } from '../core/limits.js';
import type { RequestId } from '../core/protocol.js';
import { appendEach, type AppendDeps } from './appendBatch.js';
import { byteLength, rawText } from './wsFrames.js';
import { wireError } from './httpErrors.js';
import { nestsDeeperThan } from './jsonDepth.js';
import { parseWith } from './schemas.js';
import type { Principal } from './tokens.js';

export interface AppendConnectionContext extends AppendDeps {
  heartbeatMs: number;
  silenceMs: number;
  /** Called for errors that are not the client's fault. */
  logError: (err: unknown, msg: string) => void;
}

const requestId = z.union([z.string().max(100), z.number()]);

/** An `appends` frame: the list only; each entry is checked on its own (`appendEach`). */
const appendsFrameSchema = z.strictObject(
  {
    type: z.literal('appends', { error: 'must be "appends"' }),
    req: requestId,
    appends: z
      .array(z.unknown(), { error: 'must be an array of appends' })
      .min(1, { error: 'must hold at least one append' })
      .max(MAX_APPENDS_PER_REQUEST, { error: `must hold at most ${MAX_APPENDS_PER_REQUEST} appends` }),
  },
  { error: 'must be a JSON object { type, req, appends }' },
);

/** A WebSocket close reason is at most 123 bytes of UTF-8. */
const MAX_REASON_CHARS = 120;

export class AppendConnection {
  /** Frames read and not yet answered (their reply not yet written to the socket). */
  private inFlight = 0;
  private paused = false;
  private lastSeen = Date.now();
  private readonly heartbeat: NodeJS.Timeout;
  private silenceTimer: NodeJS.Timeout;
  private closed = false;
  private stopping = false;
  private readonly idle: (() => void)[] = [];
  readonly done: Promise<void>;

  constructor(
    private readonly socket: WebSocket,
    private readonly principal: Principal,
    private readonly ctx: AppendConnectionContext,
  ) {
    this.done = new Promise((resolve) => socket.once('close', () => resolve()));
    socket.on('message', (data, isBinary) => this.onMessage(data, isBinary));
    socket.on('pong', () => (this.lastSeen = Date.now()));
    socket.on('ping', () => (this.lastSeen = Date.now()));
    socket.on('close', () => this.onClosed());
    socket.on('error', () => socket.terminate());
    this.heartbeat = setInterval(() => socket.ping(), ctx.heartbeatMs);
    this.heartbeat.unref();
    this.silenceTimer = this.armSilenceTimer(ctx.silenceMs);
    ctx.metrics.wsAppendConnections.inc();
    this.send({
      type: 'hello',
      protocol: 1,
      maxAppends: MAX_APPENDS_PER_REQUEST,
      maxMessageBytes: ctx.limits.maxBodyBytes,
      framesAhead: APPEND_FRAMES_AHEAD,
    });
  }

  /** Graceful stop: frames already read are written and answered, later ones refused; then the socket closes (1001). */
  async shutdown(): Promise<void> {
    this.stopping = true;
    if (this.inFlight > 0) await new Promise<void>((resolve) => this.idle.push(resolve));
    if (!this.closed) this.socket.close(1001, 'server shutting down');
    await this.done;
  }

  private armSilenceTimer(delayMs: number): NodeJS.Timeout {
    const timer = setTimeout(() => {
      if (this.closed) return;
      const left = this.lastSeen + this.ctx.silenceMs - Date.now();
      if (left > 0) this.silenceTimer = this.armSilenceTimer(left);
      else this.socket.terminate();
    }, delayMs);
    timer.unref();
    return timer;
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    this.lastSeen = Date.now();
    if (this.closed) return;
    const limit = this.ctx.limits.maxBodyBytes;
    const size = byteLength(data);
    if (size > limit) {
      this.closeWith(
        APPEND_CLOSE.tooLarge,
        `too_large: a frame may hold at most ${limit} bytes (got ${size})`,
      );
      return;
    }
    if (isBinary) {
      this.closeWith(APPEND_CLOSE.malformed, 'invalid_input: message: must be a text frame holding JSON');
      return;
    }
    let raw: unknown;
    try {
      raw = JSON.parse(rawText(data));
    } catch {
      this.closeWith(APPEND_CLOSE.malformed, 'invalid_input: message: must be valid JSON');
      return;
    }
    const req = requestIdOf(raw);
    if (req === undefined) {
      this.closeWith(
        APPEND_CLOSE.malformed,
        'invalid_input: req: a JSON object with req, a string of at most 100 characters or a number',
      );
      return;
    }
    let appends: unknown[];
    try {
      if (this.stopping) throw new IdemError('unavailable', 'server is shutting down');
      if (nestsDeeperThan(raw, this.ctx.limits.maxJsonDepth)) {
        throw new InvalidInputError(
          'message',
          `must not nest arrays and objects deeper than ${this.ctx.limits.maxJsonDepth} levels`,
        );
      }
      appends = plainFrame(raw) ?? parseWith(appendsFrameSchema, raw, '', 'message').appends;
    } catch (err) {
      this.ctx.metrics.wsAppendFrames.inc({ outcome: 'error' });
      this.send({ type: 'error', req, error: wireError(err as IdemError) });
      return;
    }
    this.ctx.metrics.wsAppendFrames.inc({ outcome: 'results' });
    this.inFlight++;
    // Reading stops while this many frames wait for their replies: a client that sends and never
    // reads is held back by TCP instead of making the server queue its appends and replies.
    if (this.inFlight >= APPEND_FRAMES_AHEAD && !this.paused) {
      this.paused = true;
      this.socket.pause();
    }
    void appendEach(this.ctx, this.principal, appends, (err) => this.ctx.logError(err, 'append failed')).then(
      (results) => this.answer({ type: 'results', req, results }),
    );
  }

  /** Sends a frame's reply; the frame stops counting once the reply is written. */
  private answer(msg: AppendServerMessage): void {
    const done = (): void => {
      this.inFlight--;
      if (this.paused && this.inFlight < APPEND_FRAMES_AHEAD) {
        this.paused = false;
        if (!this.closed) this.socket.resume();
      }
      if (this.inFlight === 0) for (const wake of this.idle.splice(0)) wake();
    };
    if (this.closed || this.socket.readyState !== this.socket.OPEN) {
      done();
      return;
    }
    this.socket.send(JSON.stringify(msg), done);
  }

  private send(msg: AppendServerMessage): void {
    if (this.closed || this.socket.readyState !== this.socket.OPEN) return;
    this.socket.send(JSON.stringify(msg));
  }

  private closeWith(code: number, reason: string): void {
    this.ctx.metrics.wsAppendFrames.inc({ outcome: 'closed' });
    this.socket.close(code, reason.slice(0, MAX_REASON_CHARS));
    // A peer that does not answer the close frame is dropped after the silence time.
    setTimeout(() => this.socket.terminate(), this.ctx.silenceMs).unref();
  }

  private onClosed(): void {
    if (!this.closed) this.ctx.metrics.wsAppendConnections.dec();
    this.closed = true;
    clearInterval(this.heartbeat);
    clearTimeout(this.silenceTimer);
  }
}

/**
 * The appends of a frame that is plainly well-formed (what every client sends), without the schema's
 * cost per frame; otherwise null, and the schema names what is wrong. `req` is checked already.
 */
function plainFrame(raw: unknown): unknown[] | null {
  const frame = raw as Record<string, unknown>;
  let keys = 0;
  for (const key in frame) {
    if (key !== 'type' && key !== 'req' && key !== 'appends') return null;
    keys++;
  }
  const appends = frame.appends;
  if (keys !== 3 || frame.type !== 'appends' || !Array.isArray(appends)) return null;
  return appends.length >= 1 && appends.length <= MAX_APPENDS_PER_REQUEST ? appends : null;
}

function requestIdOf(raw: unknown): RequestId | undefined {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
  const req = (raw as { req?: unknown }).req;
  if (typeof req === 'number') return req;
  return typeof req === 'string' && req.length <= 100 ? req : undefined;
}
