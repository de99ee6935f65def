/** JSON over HTTP with the global `fetch`: bearer token, error bodies turned back into IdemErrors, safe retries. */
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

export class HttpApi {
  readonly baseUrl: string;
  private readonly token: string | undefined;
  private readonly attempts: number;
  private readonly timeoutMs: number;

  constructor(baseUrl: string, options: HttpApiOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.token = options.token;
    this.attempts = options.attempts ?? 3;
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  get authHeaders(): Record<string, string> {
    return this.token === undefined ? {} : { authorization: `Bearer ${this.token}` };
  }

  /** `retry`: the request may be sent again after a network failure (it must be idempotent). */
  async request<T>(method: string, path: string, options: { query?: Query; body?: unknown; retry?: boolean } = {}): Promise<T> {
    const url = this.baseUrl + path + queryString(options.query);
    const headers: Record<string, string> = { accept: 'application/json', ...this.authHeaders };
    let body: string | undefined;
    if (options.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(options.body);
    }
    const attempts = options.retry ? this.attempts : 1;
    for (let attempt = 1; ; attempt++) {
      let res: Response;
      try {
        res = await fetch(url, { method, headers, body: body ?? null, signal: AbortSignal.timeout(this.timeoutMs) });
      } catch (err) {
        if (attempt < attempts) {
          await delay(100 * 3 ** (attempt - 1));
          continue;
        }
        throw new IdemError('unavailable', `${method} ${url} failed: ${describe(err)}`, { url }, { cause: err });
      }
      const text = await res.text();
      let json: unknown = undefined;
      try {
        json = text.length > 0 ? JSON.parse(text) : undefined;
      } catch {
        // fall through: a non-JSON reply is reported below
      }
      if (res.ok) return json as T;
      if (res.status >= 502 && res.status <= 504 && attempt < attempts && json === undefined) {
        await delay(100 * 3 ** (attempt - 1));
        continue;
      }
      throw errorFromWire((json as { error?: unknown } | undefined)?.error, res.status);
    }
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
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  return e.cause?.code ?? e.cause?.message ?? e.message ?? String(err);
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
