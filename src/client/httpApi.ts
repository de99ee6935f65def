/**
 * JSON over HTTP with `node:http`/`node:https`: bearer token, error bodies turned back into IdemErrors,
 * safe retries. Connections are kept alive and reused, with Nagle's algorithm off (each request is
 * one small write that must leave at once).
 */
import http from 'node:http';
import https from 'node:https';
import { IdemError } from '../core/errors.js';
import { errorFromWire } from './errorFromWire.js';

export interface HttpApiOptions {
  token?: string;
  /** Attempts for requests that are safe to repeat (reads, and appends, whose event ids make them idempotent). @default 3 */
  attempts?: number;
  /** Per-request timeout. @default 30000 */
  timeoutMs?: number;
}

export type Query = Record<string, string | number | boolean | readonly string[] | undefined>;

/**
 * An idle kept-alive connection is closed after this long, well before the server closes it (Fastify:
 * 72 s), so a request is not sent on a connection the server is closing at that moment.
 */
const IDLE_SOCKET_MS = 4_000;

interface RawResponse {
  status: number;
  text: string;
}

export class HttpApi {
  readonly baseUrl: string;
  private readonly token: string | undefined;
  /** Attempts for requests that are safe to repeat. */
  readonly attempts: number;
  /** Per-request timeout in milliseconds. */
  readonly timeoutMs: number;
  private readonly agent: http.Agent;
  private readonly transport: typeof http | typeof https;

  constructor(baseUrl: string, options: HttpApiOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.token = options.token;
    this.attempts = options.attempts ?? 3;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    const secure = new URL(this.baseUrl).protocol === 'https:';
    this.transport = secure ? https : http;
    // Idle kept-alive sockets are unref'd by the agent: they do not keep a process alive.
    const agentOptions = { keepAlive: true, timeout: IDLE_SOCKET_MS, noDelay: true };
    this.agent = secure ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
  }

  get authHeaders(): Record<string, string> {
    return this.token === undefined ? {} : { authorization: `Bearer ${this.token}` };
  }

  /**
   * `retry`: the request may be sent again after a network failure (it must be idempotent).
   * `answerStatuses`: error statuses whose JSON body is an answer too (`/health` replies 503 with its report).
   * `json`: the body already serialised (instead of `body`).
   */
  async request<T>(
    method: string,
    path: string,
    options: {
      query?: Query;
      body?: unknown;
      json?: string;
      retry?: boolean;
      answerStatuses?: readonly number[];
    } = {},
  ): Promise<T> {
    const url = this.baseUrl + path + queryString(options.query);
    const headers: Record<string, string> = { accept: 'application/json', ...this.authHeaders };
    let body: Buffer | undefined;
    const json = options.json ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
    if (json !== undefined) {
      body = Buffer.from(json, 'utf8');
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(body.length);
    }
    const attempts = options.retry ? this.attempts : 1;
    for (let attempt = 1; ; attempt++) {
      let res: RawResponse;
      try {
        res = await this.send(method, url, headers, body);
      } catch (err) {
        if (attempt < attempts) {
          await delay(100 * 3 ** (attempt - 1));
          continue;
        }
        throw new IdemError(
          'unavailable',
          `${method} ${url} failed: ${describe(err)}`,
          { url },
          { cause: err },
        );
      }
      const text = res.text;
      let json: unknown = undefined;
      try {
        json = text.length > 0 ? JSON.parse(text) : undefined;
      } catch {
        // fall through: a non-JSON reply is reported below
      }
      if (res.status >= 200 && res.status < 300) return json as T;
      if (json !== undefined && options.answerStatuses?.includes(res.status)) return json as T;
      if (res.status >= 502 && res.status <= 504 && attempt < attempts && json === undefined) {
        await delay(100 * 3 ** (attempt - 1));
        continue;
      }
      throw errorFromWire((json as { error?: unknown } | undefined)?.error, res.status);
    }
  }

  /** One request and its whole reply; rejects on a network error or after `timeoutMs`. */
  private send(
    method: string,
    url: string,
    headers: Record<string, string>,
    body: Buffer | undefined,
  ): Promise<RawResponse> {
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined = undefined;
      const fail = (err: Error): void => {
        clearTimeout(timer);
        reject(err);
      };
      const req = this.transport.request(url, { method, headers, agent: this.agent }, (res) => {
        res.setEncoding('utf8');
        let text = '';
        res.on('data', (chunk: string) => (text += chunk));
        res.on('error', fail);
        res.on('end', () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, text });
        });
      });
      timer = setTimeout(() => {
        req.destroy(
          Object.assign(new Error(`no complete reply within ${this.timeoutMs} ms`), { code: 'ETIMEDOUT' }),
        );
      }, this.timeoutMs);
      req.on('error', fail);
      req.end(body);
    });
  }
}

function queryString(query: Query | undefined): string {
  if (!query) return '';
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value as readonly string[]) params.append(key, v);
    else params.append(key, String(value));
  }
  const s = params.toString();
  return s.length === 0 ? '' : `?${s}`;
}

function describe(err: unknown): string {
  const e = err as { code?: string; message?: string };
  return e.code ?? e.message ?? String(err);
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
