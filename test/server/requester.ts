/** One way to send HTTP requests to the server under test: fastify inject (in-process) or fetch over a real port. */
import type { FastifyInstance } from 'fastify';

export interface Reply {
  status: number;
  /** The parsed JSON body, or undefined when it is not JSON. */
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- test replies are inspected loosely
  text: string;
  contentType: string;
}

export interface RequestOptions {
  /** Sent as JSON. */
  body?: unknown;
  /** Sent as is (with `content-type: application/json` unless headers say otherwise). */
  raw?: string | Buffer;
  headers?: Record<string, string>;
  token?: string;
}

export type Requester = (method: string, path: string, options?: RequestOptions) => Promise<Reply>;

function prepare(options: RequestOptions): {
  headers: Record<string, string>;
  payload: string | Buffer | undefined;
} {
  const headers: Record<string, string> = {};
  let payload: string | Buffer | undefined;
  if (options.raw !== undefined) {
    payload = options.raw;
    headers['content-type'] = 'application/json';
  } else if (options.body !== undefined) {
    payload = JSON.stringify(options.body);
    headers['content-type'] = 'application/json';
  }
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  Object.assign(headers, options.headers);
  return { headers, payload };
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export function injectRequester(app: FastifyInstance): Requester {
  return async (method, path, options = {}) => {
    const { headers, payload } = prepare(options);
    const res = await app.inject({
      method: method as 'GET',
      url: path,
      headers,
      ...(payload !== undefined ? { payload } : {}),
    });
    return {
      status: res.statusCode,
      text: res.body,
      json: parse(res.body),
      contentType: String(res.headers['content-type'] ?? ''),
    };
  };
}

export function fetchRequester(baseUrl: string): Requester {
  return async (method, path, options = {}) => {
    const { headers, payload } = prepare(options);
    const res = await fetch(baseUrl + path, { method, headers, body: payload ?? null });
    const text = await res.text();
    return {
      status: res.status,
      text,
      json: parse(text),
      contentType: res.headers.get('content-type') ?? '',
    };
  };
}
