/** A raw WebSocket client for protocol tests: sends JSON messages and records every message received. */
import WebSocket from 'ws';
import { until } from '../support/until.js';

export type Msg = Record<string, unknown> & { type: string };

export class WsPeer {
  readonly messages: Msg[] = [];
  closeCode: number | null = null;
  closeReason = '';
  private constructor(readonly socket: WebSocket) {
    socket.on('message', (data: Buffer) => this.messages.push(JSON.parse(data.toString('utf8')) as Msg));
    socket.on('close', (code, reason) => {
      this.closeCode = code;
      this.closeReason = reason.toString('utf8');
    });
    socket.on('error', () => undefined);
  }

  /** `path`: the WebSocket route. @default '/v1/subscribe' */
  static open(
    url: string,
    options: { token?: string; autoPong?: boolean; path?: string } = {},
  ): Promise<WsPeer> {
    const socket = new WebSocket(`${url.replace(/^http/, 'ws')}${options.path ?? '/v1/subscribe'}`, {
      headers: options.token ? { authorization: `Bearer ${options.token}` } : {},
      autoPong: options.autoPong ?? true,
    });
    return new Promise((resolve, reject) => {
      socket.once('open', () => resolve(new WsPeer(socket)));
      socket.once('error', reject);
    });
  }

  send(msg: Msg): void {
    this.socket.send(JSON.stringify(msg));
  }

  /** Waits for a message matching `pred` (received at or after index `from`) and returns it. */
  async waitFor(pred: (m: Msg) => boolean, message: string, from = 0): Promise<Msg> {
    return until(() => this.messages.slice(from).find(pred), { message, timeoutMs: 15_000 });
  }

  /** The reply (`ok` or `error`) to request `req`. */
  reply(req: number): Promise<Msg> {
    return this.waitFor(
      (m) => (m.type === 'ok' || m.type === 'error') && m.req === req,
      `reply to request ${req}`,
    );
  }

  events(sub: string): { position: number; stream: string }[] {
    return this.messages
      .filter((m) => m.type === 'events' && m.sub === sub)
      .flatMap((m) => m.events as { position: number; stream: string }[]);
  }

  async close(): Promise<void> {
    if (this.socket.readyState === WebSocket.CLOSED) return;
    const closed = new Promise((resolve) => this.socket.once('close', resolve));
    this.socket.close();
    await closed;
  }

  /** Drops the TCP connection without a closing handshake. */
  terminate(): void {
    this.socket.terminate();
  }
}

export function errorCode(m: Msg): string | undefined {
  return (m.error as { code?: string } | undefined)?.code;
}
