/** How errors leave the server: a stable JSON body and an HTTP status chosen from the error code. */
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { IdemError, InvalidInputError, TooLargeError, type ErrorCode } from '../core/errors.js';
import { clip, clipDetails, MAX_MESSAGE } from './clip.js';
import type { WireError } from '../core/protocol.js';

const STATUS: Record<ErrorCode, number> = {
  invalid_input: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  wrong_expected_version: 409,
  idempotency_conflict: 409,
  consumer_busy: 409,
  consumer_identity_conflict: 409,
  fenced: 409,
  too_large: 413,
  rate_limited: 429,
  internal: 500,
  upcast_failed: 500,
  closed: 503,
  unavailable: 503,
  storage_full: 507,
};

export function statusForCode(code: ErrorCode): number {
  return STATUS[code] ?? 500;
}

/** The error as sent: message and details bounded, since both can quote what the client sent. */
export function wireError(err: IdemError): WireError {
  return { code: err.code, message: clip(err.message, MAX_MESSAGE), details: clipDetails(err.details) };
}

/** The JSON body of every error reply: `{ error: { code, message, details } }`. */
export function errorBody(err: IdemError): { error: WireError } {
  return { error: wireError(err) };
}

interface FastifyLikeError {
  code?: unknown;
  statusCode?: unknown;
  message?: unknown;
}

/**
 * Turns anything thrown while handling a request into an IdemError. Fastify's own request errors
 * (bad JSON, wrong content type, body too large) become `invalid_input` / `too_large`, never a 500.
 * Returns `null` for errors that are not the caller's fault (a bug or an outage), which are logged.
 */
export function toIdemError(err: unknown, bodyLimit: number): IdemError | null {
  if (err instanceof IdemError) return err;
  const e = (typeof err === 'object' && err !== null ? err : {}) as FastifyLikeError;
  const code = typeof e.code === 'string' ? e.code : '';
  const status = typeof e.statusCode === 'number' ? e.statusCode : 0;
  const message = typeof e.message === 'string' ? e.message : 'bad request';
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE' || status === 413) {
    return new TooLargeError('body', bodyLimit + 1, bodyLimit);
  }
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || status === 415) {
    return new InvalidInputError('content-type', 'must be application/json');
  }
  if (code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return new InvalidInputError('body', 'must not be empty');
  if (code.startsWith('FST_ERR_CTP') || err instanceof SyntaxError) {
    return new InvalidInputError('body', `must be valid JSON (${message})`);
  }
  if (status >= 400 && status < 500) return new InvalidInputError('request', message);
  return null;
}

/**
 * Answers requests Node's HTTP parser refuses (oversized headers or URL, malformed request lines) with
 * the same JSON error body as every other error, then closes the connection.
 */
export function clientErrorHandler(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  let status: number;
  let e: IdemError;
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    status = 431;
    e = new IdemError('too_large', 'headers: the request line and headers exceed the server limit', {
      field: 'headers',
    });
  } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    status = 408;
    e = new InvalidInputError('request', 'was not received in time');
  } else {
    status = 400;
    e = new InvalidInputError('request', 'is not a well-formed HTTP request');
  }
  if (socket.writable) socket.write(rawErrorResponse(status, e));
  socket.destroy();
}

/**
 * An error reply to write straight to a socket that no HTTP parser or router answers for (a refused
 * connection or upgrade, a request Node could not parse): the usual body, then `connection: close`.
 */
export function rawErrorResponse(status: number, err: IdemError, headers = ''): string {
  const body = JSON.stringify(errorBody(err));
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\ncontent-type: application/json; charset=utf-8\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\n${headers}connection: close\r\n\r\n${body}`
  );
}
