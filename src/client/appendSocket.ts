/**
 * One append WebSocket (`/v1/appends/ws`) to the server: frames of appends out, their results back,
 * matched by `req`. The socket does not keep the process alive while no frame awaits its reply.
 */
import type { Socket } from 'node:net';
import WebSocket, { type RawData } from 'ws';
import { APPEND_SOCKET_PATH, type AppendServerMessage } from '../core/appendProtocol.js';
import type { AppendResult } from '../core/event.js';
import { IdemError } from '../core/errors.js';
import type { WireError } from '../core/protocol.js';
import { errorFromWire } from './errorFromWire.js';

/** One append's outcome as the server sends it. */
export type Outcome = AppendResult | { error: WireError };

/** The server does not offer the append socket (an older server, or a proxy that refuses upgrades). */
export class NoAppendSocket extends Error {
  override readonly name = 'NoAppendSocket';
}

/**
 * The socket failed: it could not be opened, or it closed (or timed out) before a frame's reply. A
 * frame sent on it may or may not have been written.
 */
export class AppendSocketLost extends Error {
  override readonly name = 'AppendSocketLost';

  /** `sent`: frames had been sent on the socket (their appends may have been written). */
  constructor(
    message: string,
    readonly sent = true,
  ) {
    super(message);
  }
}

interface Pending {
  resolve: (outcomes: Outcome[]) => void;
  reject: (err: Error) => void;
  count: number;
  /** When the frame's reply is overdue (`Date.now()` scale). */
  deadline: number;
}

export class AppendSocket {
  private readonly pending = new Map<number, Pending>();
  private nextReq = 1;
  private lost: AppendSocketLost | null = null;
  /** `close` was called: the socket closes when its last reply arrives. */
  private ending = false;
  /** The TCP socket under the WebSocket: referenced only while replies are awaited. */
  private raw: Socket | null = null;
  /**
   * Armed while frames await replies: at the oldest one's deadline it ends the socket if that reply is
   * still missing. One timer for all the frames, re-armed only when it fires, not one per frame.
   */
  private watchdog: NodeJS.Timeout | null = null;

  private constructor(
    private readonly ws: WebSocket,
    readonly url: string,
    /** Most appends in one frame (the server's `hello`). */
    readonly maxAppends: number,
    /** Largest frame the server reads, in bytes (the server's `hello`). */
    readonly maxMessageBytes: number,
    private readonly timeoutMs: number,
    raw: Socket | null,
  ) {
    this.raw = raw;
    this.raw?.unref();
    ws.on('message', (data) => this.onMessage(data));
    ws.on('error', () => ws.terminate());
    ws.on('close', (code, reason) => this.onClose(code, reason.toString('utf8')));
  }

  /**
   * Opens the socket and waits for the server's `hello`. Rejects with `NoAppendSocket` when the server
   * has no such route, with the server's error (`unauthorized`, `forbidden`, `unavailable`) when it
   * refuses the upgrade, and with `AppendSocketLost` on a network failure.
   */
  static open(baseUrl: string, headers: Record<string, string>, timeoutMs: number): Promise<AppendSocket> {
    const url = `${baseUrl.replace(/^http/, 'ws')}${APPEND_SOCKET_PATH}`;
    const ws = new WebSocket(url, {
      headers,
      perMessageDeflate: false,
      handshakeTimeout: timeoutMs,
      generateMask: zeroMask,
    });
    let raw: Socket | null = null;
    return new Promise<AppendSocket>((resolve, reject) => {
      let settled = false;
      const fail = (err: Error): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        ws.removeAllListeners();
        ws.on('error', () => undefined);
        ws.terminate();
        reject(err);
      };
      const timer = setTimeout(
        () => fail(new AppendSocketLost(`${url}: no hello within ${timeoutMs} ms`, false)),
        timeoutMs,
      );
      ws.on('upgrade', (res) => (raw = res.socket));
      ws.on('unexpected-response', (_req, res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => {
          let wire: { code?: unknown; details?: { field?: unknown } } | undefined;
          try {
            wire = (JSON.parse(body) as { error?: typeof wire }).error;
          } catch {
            wire = undefined;
          }
          const status = res.statusCode ?? 0;
          // A server without the route answers 404; a proxy that drops the upgrade headers reaches
          // the route as a plain GET, which the server answers 400 naming `upgrade`.
          if (status === 404 || (status === 400 && wire?.details?.field === 'upgrade'))
            fail(new NoAppendSocket(`${url}: HTTP ${status}`));
          else fail(errorFromWire(wire, status));
        });
        res.on('error', (err) => fail(new AppendSocketLost(`${url}: ${err.message}`, false)));
      });
      ws.on('error', (err) => fail(new AppendSocketLost(`${url}: ${describe(err)}`, false)));
      ws.on('close', () => fail(new AppendSocketLost(`${url}: closed before its hello`, false)));
      ws.once('message', (data) => {
        let hello: AppendServerMessage | undefined;
        try {
          hello = JSON.parse(rawText(data)) as AppendServerMessage;
        } catch {
          hello = undefined;
        }
        if (hello?.type !== 'hello') {
          fail(new IdemError('internal', `${url}: the server's first message is not its hello`));
          return;
        }
        settled = true;
        clearTimeout(timer);
        ws.removeAllListeners();
        resolve(new AppendSocket(ws, url, hello.maxAppends, hello.maxMessageBytes, timeoutMs, raw));
      });
    });
  }

  /** False once the socket closed: open another. */
  get usable(): boolean {
    return this.lost === null && !this.ending && this.ws.readyState === WebSocket.OPEN;
  }

  /**
   * Sends one frame holding `entries` (the JSON texts of `count` appends, joined by commas) and
   * resolves with their outcomes in order. Rejects with the server's error when it refuses the frame
   * as a whole, and with `AppendSocketLost` when the socket closes before the reply.
   */
  request(entries: string, count: number): Promise<Outcome[]> {
    // Nothing is sent on a closed or closing socket.
    if (this.lost || this.ending)
      return Promise.reject(new AppendSocketLost(`${this.url}: ${this.lost ? 'closed' : 'closing'}`, false));
    const req = this.nextReq++;
    return new Promise<Outcome[]>((resolve, reject) => {
      if (this.pending.size === 0) this.raw?.ref();
      this.pending.set(req, { resolve, reject, count, deadline: Date.now() + this.timeoutMs });
      this.watchdog ??= this.armWatchdog(this.timeoutMs);
      this.ws.send(`{"type":"appends","req":${req},"appends":[${entries}]}`);
    });
  }

  /**
   * A reply that never comes (a server that stopped answering on a live connection) ends the socket,
   * as an HTTP request times out: the frames on it are then lost. Checked at the oldest frame's
   * deadline; while it is not yet overdue the check comes again at its deadline.
   */
  private armWatchdog(ms: number): NodeJS.Timeout {
    const timer = setTimeout(() => {
      this.watchdog = null;
      // The map keeps the order frames were sent in: the first is the oldest.
      const oldest = this.pending.values().next();
      if (oldest.done) return;
      const left = oldest.value.deadline - Date.now();
      if (left > 0) {
        this.watchdog = this.armWatchdog(left);
        return;
      }
      this.lose(`no reply within ${this.timeoutMs} ms`);
      this.ws.terminate();
    }, ms);
    timer.unref();
    return timer;
  }

  /** Closes the socket once the frames sent on it are answered; no frame is sent after this. */
  close(): void {
    this.ending = true;
    if (this.pending.size > 0) return;
    this.lose('closed by the client');
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close(1000);
    else this.ws.terminate();
  }

  private onMessage(data: RawData): void {
    let msg: AppendServerMessage;
    try {
      msg = JSON.parse(rawText(data)) as AppendServerMessage;
    } catch {
      return;
    }
    if (msg.type !== 'results' && msg.type !== 'error') return;
    const req = msg.req;
    const p = typeof req === 'number' ? this.pending.get(req) : undefined;
    if (!p) return;
    this.pending.delete(req as number);
    if (this.pending.size === 0) this.raw?.unref();
    if (msg.type === 'error') p.reject(errorFromWire(msg.error));
    else if (!Array.isArray(msg.results) || msg.results.length !== p.count)
      p.reject(
        new IdemError(
          'internal',
          `the server answered ${Array.isArray(msg.results) ? msg.results.length : 'no'} results for ${p.count} appends`,
        ),
      );
    else p.resolve(msg.results);
    if (this.ending && this.pending.size === 0) this.close();
  }

  private onClose(code: number, reason: string): void {
    this.lose(`closed (${code}${reason.length > 0 ? ` ${reason}` : ''})`);
  }

  private lose(why: string): void {
    this.lost ??= new AppendSocketLost(`${this.url}: ${why}`);
    this.raw?.unref();
    if (this.watchdog) clearTimeout(this.watchdog);
    this.watchdog = null;
    for (const [req, p] of this.pending) {
      this.pending.delete(req);
      p.reject(this.lost);
    }
  }
}

/**
 * The masking key of every frame the client sends: zeros, so that neither side spends a pass over
 * each frame's bytes on masking. RFC 6455 asks clients for unpredictable keys so that a script in a
 * browser cannot choose the bytes an intermediary sees; here the bytes are JSON texts this library
 * writes (no raw control characters, so nothing that reads as an HTTP request to a proxy).
 */
function zeroMask(mask: Buffer): void {
  mask.fill(0);
}

function describe(err: unknown): string {
  const e = err as { code?: string; message?: string };
  return e.code ?? e.message ?? String(err);
}

function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  if (data instanceof ArrayBuffer) return Buffer.from(data).toString('utf8');
  return data.toString('utf8');
}
