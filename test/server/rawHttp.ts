/** HTTP at the socket level for the hardening tests: any Host or Origin header, slow or unfinished requests. */
import { request as httpRequest } from 'node:http';
import { connect as tcpConnect, type Socket } from 'node:net';
import WebSocket from 'ws';
import { until } from '../support/until.js';

/** The error body of every refused request. */
export interface ErrorReply {
  error: { code: string; message: string; details: Record<string, unknown> };
}

export interface RawReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- inspected field by field
}

/** One request on its own connection, with any headers (Host and Origin included). */
export function send(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<RawReply> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: hostname, port, method, path, agent: false, headers: { connection: 'close', ...headers } },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => {
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The status a WebSocket upgrade gets (101 when it opens). */
export function upgradeStatus(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/subscribe`, { headers });
    ws.on('unexpected-response', (req, res) => {
      resolve(res.statusCode ?? 0);
      req.destroy();
    });
    ws.on('open', () => {
      resolve(101);
      ws.close();
    });
    ws.on('error', (err) => reject(err));
  });
}

/** A raw TCP connection that records what the server sends and whether it closed the connection. */
export async function rawConnection(
  url: string,
): Promise<{ socket: Socket; data(): string; closed(): boolean }> {
  const { hostname, port } = new URL(url);
  const socket = tcpConnect(Number(port), hostname);
  let data = '';
  let closed = false;
  socket.setEncoding('utf8').on('data', (d: string) => (data += d));
  socket.on('close', () => (closed = true));
  socket.on('error', () => undefined);
  await new Promise((resolve) => socket.once('connect', resolve));
  return { socket, data: () => data, closed: () => closed };
}

/**
 * Starts a POST that announces `contentLength` bytes and sends only `start` of them (a slow body),
 * and resolves with what the server sent once it has closed the connection.
 */
export async function unfinishedPost(
  url: string,
  contentLength: number,
  token?: string,
  start = '{',
): Promise<string> {
  const c = await rawConnection(url);
  c.socket.write(
    'POST /v1/streams/invoice-1/events HTTP/1.1\r\nhost: 127.0.0.1\r\n' +
      (token === undefined ? '' : `authorization: Bearer ${token}\r\n`) +
      `content-type: application/json\r\ncontent-length: ${contentLength}\r\n\r\n${start}`,
  );
  try {
    await until(() => c.closed(), {
      message: 'the server to close an unfinished request',
      timeoutMs: 15_000,
    });
  } finally {
    c.socket.destroy();
  }
  return c.data();
}
