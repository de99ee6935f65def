/**
 * The client's append WebSocket, opened on the first append and again after it is lost. Remembers
 * when the server does not offer one, so that appends then go over HTTP without asking again.
 */
import { ClosedError } from '../core/errors.js';
import { APPEND_SOCKET_PATH } from '../core/appendProtocol.js';
import { AppendSocket, NoAppendSocket } from './appendSocket.js';

export class AppendSocketLink {
  private current: AppendSocket | null = null;
  private opening: Promise<AppendSocket> | null = null;
  private absent = false;
  private closed = false;

  constructor(
    private readonly baseUrl: string,
    private readonly headers: Record<string, string>,
    private readonly timeoutMs: number,
  ) {}

  /** The socket's URL, for messages. */
  get url(): string {
    return `${this.baseUrl.replace(/^http/, 'ws')}${APPEND_SOCKET_PATH}`;
  }

  /** False once the server answered that it has no append socket. */
  get offered(): boolean {
    return !this.absent && !this.closed;
  }

  /** The open socket, or a new one; rejects as `AppendSocket.open` does. */
  get(): Promise<AppendSocket> {
    if (this.closed) return Promise.reject(new ClosedError('remote store'));
    if (this.current?.usable) return Promise.resolve(this.current);
    this.opening ??= AppendSocket.open(this.baseUrl, this.headers, this.timeoutMs).then(
      (socket) => {
        this.opening = null;
        if (this.closed) socket.close();
        else this.current = socket;
        return socket;
      },
      (err: unknown) => {
        this.opening = null;
        if (err instanceof NoAppendSocket) this.absent = true;
        throw err;
      },
    );
    return this.opening;
  }

  /** Opens no more sockets, and closes the open one once its frames are answered. */
  close(): void {
    this.closed = true;
    this.current?.close();
    this.current = null;
  }
}
