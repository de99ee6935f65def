// Appends through connect(url) travel on the append WebSocket (/v1/appends/ws): each append gets the
// outcome it would get over HTTP, a lost socket is replaced, an append whose reply was lost is sent
// again (its event ids make that safe) and a server without the socket gets HTTP requests.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import type WebSocket from 'ws';
import { connect } from '../../src/client/connect.js';
import type { EventStore } from '../../src/core/eventStore.js';
import {
  IdemError,
  InvalidInputError,
  TooLargeError,
  WrongExpectedVersionError,
} from '../../src/core/errors.js';
import { startServer, type RunningServer } from '../../src/server/startServer.js';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { randomStream } from '../support/names.js';
import { tempDir } from '../support/tempDir.js';
import { withServer, type ServerFixture } from '../server/serverFixture.js';
import { WsPeer } from '../server/wsPeer.js';

const PATH = '/v1/appends/ws';

/** Counts the frames the server receives on its append sockets from now on. */
function countFrames(server: RunningServer): { frames: number; sockets: number } {
  const seen = { frames: 0, sockets: 0 };
  server.app.websocketServer.on('connection', (ws: WebSocket, req: http.IncomingMessage) => {
    if (req.url !== PATH) return;
    seen.sockets++;
    ws.on('message', () => seen.frames++);
  });
  return seen;
}

/** `idem_ws_append_frames_total` by outcome, and `idem_ws_append_connections`. */
async function frameMetrics(f: ServerFixture): Promise<{ frames: Record<string, number>; open: number }> {
  const frames: Record<string, number> = {};
  for (const v of (await f.server.metrics.wsAppendFrames.get()).values)
    frames[String(v.labels.outcome)] = v.value;
  const open = (await f.server.metrics.wsAppendConnections.get()).values[0]?.value ?? 0;
  return { frames, open };
}

/** Requests the server answered on `route`, whatever their status. */
async function requests(f: ServerFixture, route: string): Promise<number> {
  const { values } = await f.server.metrics.httpRequests.get();
  return values.filter((v) => v.labels.route === route).reduce((n, v) => n + v.value, 0);
}

describe('remote store: appends over the append socket', () => {
  it('appends made together travel in one frame, each with its own outcome', () =>
    withServer({ storeLimits: { maxEventBytes: 1000 } }, async (f) => {
      const seen = countFrames(f.server);
      const remote = connect(f.url);
      try {
        const [a, b] = [randomStream(), randomStream()];
        const id = randomUUID();
        const first = await remote.append(a, [{ id, type: 'a', data: 1 }]);
        assert.deepEqual(seen, { frames: 1, sockets: 1 });
        const outcomes = await Promise.allSettled([
          // A retry of the append above.
          remote.append(a, [{ id, type: 'a', data: 1 }]),
          // Two appends expecting the same version of one stream: one of them is written.
          remote.append(b, [{ type: 'b', data: 1 }], { expectedVersion: 0 }),
          remote.append(b, [{ type: 'b', data: 2 }], { expectedVersion: 0 }),
          remote.append(a, [{ type: 'a', data: 'x'.repeat(2000) }]),
          ...Array.from({ length: 16 }, (_, i) => remote.append(randomStream(), [{ type: 'c', data: i }])),
        ]);
        assert.deepEqual(seen, { frames: 2, sockets: 1 }, 'one frame for all twenty, on the same socket');
        const [retry, b1, b2, big, ...rest] = outcomes;
        assert.ok(retry.status === 'fulfilled', String(retry.status));
        assert.deepEqual(retry.value, { ...first, duplicate: true });
        const bs = [b1, b2];
        assert.equal(bs.filter((o) => o.status === 'fulfilled').length, 1);
        const lost = bs.find((o) => o.status === 'rejected');
        assert.ok(lost?.reason instanceof WrongExpectedVersionError, String(lost?.reason));
        assert.equal(lost.reason.details.actual, 1);
        assert.ok(big.status === 'rejected' && big.reason instanceof TooLargeError, big.status);
        assert.equal(big.reason.details.field, 'events[0]');
        assert.ok(rest.every((o) => o.status === 'fulfilled' && o.value.version === 1));
        assert.equal(await f.store.streamVersion(a), 1);
        assert.equal(await f.store.streamVersion(b), 1);
        assert.equal(await requests(f, '/v1/appends'), 0, 'no HTTP append request');
        assert.equal(await requests(f, '/v1/streams/:stream/events'), 0);
      } finally {
        await remote.close();
      }
    }));

  it('refuses an invalid event with the error the HTTP route gives, naming the field', () =>
    withServer({}, async (f) => {
      const stream = randomStream();
      // Sent as is: the client checks shapes only, so this reaches the server through a raw frame.
      const peer = await WsPeer.open(f.url, { path: PATH });
      try {
        peer.send({
          type: 'appends',
          req: 'r1',
          appends: [
            { stream, events: [{ type: '', data: 1 }] },
            { stream, events: [{ type: 'ok', data: 1 }], expectedVersion: 'sometimes' },
            { stream: '', events: [{ type: 'ok', data: 1 }] },
            'not an append',
            { stream, events: [{ type: 'ok', data: 1 }] },
          ],
        });
        const reply = await peer.waitFor((m) => m.type === 'results' && m.req === 'r1', 'results');
        const [badType, badVersion, badStream, notObject, ok] = reply.results as {
          error?: { code: string; details: { field?: string } };
          version?: number;
        }[];
        assert.equal(badType?.error?.code, 'invalid_input');
        assert.equal(badType?.error?.details.field, 'events[0].type');
        assert.equal(badVersion?.error?.details.field, 'expectedVersion');
        assert.equal(badStream?.error?.details.field, 'stream');
        assert.equal(notObject?.error?.details.field, 'append');
        assert.equal(ok?.version, 1);
        assert.equal(await f.store.streamVersion(stream), 1);
      } finally {
        await peer.close();
      }
      // Through the client: the server's check, turned back into the error class.
      const remote = connect(f.url);
      try {
        await assert.rejects(
          remote.append(randomStream(), [{ type: 'x'.repeat(300), data: 1 }]),
          (err: unknown) => err instanceof InvalidInputError && err.details.field === 'events[0].type',
        );
      } finally {
        await remote.close();
      }
    }));

  it('answers a frame that is not such a list with an error for its req, and closes on a malformed one', () =>
    withServer({ limits: { maxBodyBytes: 100_000 } }, async (f) => {
      const peer = await WsPeer.open(f.url, { path: PATH });
      try {
        const hello = await peer.waitFor((m) => m.type === 'hello', 'hello');
        assert.deepEqual(hello, {
          type: 'hello',
          protocol: 1,
          maxAppends: 1000,
          maxMessageBytes: 100_000,
          framesAhead: 8,
        });
        const append = { stream: randomStream(), events: [{ type: 'a', data: 1 }] };
        peer.send({ type: 'appends', req: 1, appends: Array.from({ length: 1001 }, () => append) });
        peer.send({ type: 'appends', req: 2, appends: [] });
        peer.send({ type: 'appends', req: 3, appends: [append], extra: true });
        peer.send({ type: 'append', req: 5, appends: [append] });
        peer.send({ type: 'appends', req: 6, appends: append });
        const errors = await Promise.all(
          [1, 2, 3, 5, 6].map((req) =>
            peer.waitFor((m) => m.type === 'error' && m.req === req, `error ${req}`),
          ),
        );
        assert.deepEqual(
          errors.map((m) => [(m.error as IdemError).code, (m.error as IdemError).details.field]),
          [
            ['invalid_input', 'appends'],
            ['invalid_input', 'appends'],
            ['invalid_input', 'extra'],
            ['invalid_input', 'type'],
            ['invalid_input', 'appends'],
          ],
        );
        assert.equal(await f.store.streamVersion(append.stream), 0, 'a refused frame writes nothing');
        peer.send({ type: 'appends', req: 4, appends: [append] });
        await peer.waitFor((m) => m.type === 'results' && m.req === 4, 'results 4');
        assert.deepEqual(await frameMetrics(f), { frames: { error: 5, results: 1 }, open: 1 });
        peer.socket.send('{"type":"appends","appends":[]}');
        await peer.waitFor(() => peer.closeCode !== null, 'close');
        assert.equal(peer.closeCode, 1008);
        assert.match(peer.closeReason, /^invalid_input: req: /);
        assert.deepEqual((await frameMetrics(f)).frames, { error: 5, results: 1, closed: 1 });
      } finally {
        await peer.close();
      }
      const big = await WsPeer.open(f.url, { path: PATH });
      try {
        big.socket.send(JSON.stringify({ type: 'appends', req: 1, appends: ['x'.repeat(200_000)] }));
        await big.waitFor(() => big.closeCode !== null, 'close');
        assert.equal(big.closeCode, 1009);
        assert.match(big.closeReason, /^too_large: a frame may hold at most 100000 bytes/);
      } finally {
        await big.close();
      }
    }));

  it('refuses a caller without a token or without the append scope, as HTTP does', () =>
    withServer(
      {
        tokens: [
          { name: 'reader', token: 'tok-read', scopes: ['read'] },
          { name: 'writer', token: 'tok-append', scopes: ['append'], streamPrefixes: ['mine-'] },
        ],
      },
      async (f) => {
        for (const [token, code] of [
          [undefined, 'unauthorized'],
          ['wrong', 'unauthorized'],
          ['tok-read', 'forbidden'],
        ] as const) {
          const remote = connect(f.url, token === undefined ? {} : { token });
          try {
            await assert.rejects(
              remote.append(randomStream(), [{ type: 'a', data: 1 }]),
              (err: unknown) => err instanceof IdemError && err.code === code,
              String(token),
            );
          } finally {
            await remote.close();
          }
        }
        const seen = countFrames(f.server);
        const writer = connect(f.url, { token: 'tok-append' });
        try {
          const [inside, outside] = await Promise.allSettled([
            writer.append(`mine-${randomUUID()}`, [{ type: 'a', data: 1 }]),
            writer.append(`theirs-${randomUUID()}`, [{ type: 'a', data: 1 }]),
          ]);
          assert.equal(inside.status, 'fulfilled');
          assert.ok(outside.status === 'rejected' && outside.reason instanceof IdemError);
          assert.equal(outside.reason.code, 'not_found');
          assert.equal(seen.sockets, 1);
        } finally {
          await writer.close();
        }
      },
    ));

  it('opens a new socket after the server restarts', async () => {
    const dir = tempDir();
    const path = dir.file('events.db');
    let server: RunningServer | null = null;
    const remote = { store: null as ReturnType<typeof connect> | null };
    try {
      let store = await openSqliteStore({ path, durability: 'normal' });
      server = await startServer({ store, port: 0, closeStore: true });
      const port = (server.app.server.address() as AddressInfo).port;
      remote.store = connect(server.url);
      const stream = randomStream();
      assert.equal((await remote.store.append(stream, [{ type: 'a', data: 1 }])).version, 1);
      await server.close();
      server = null;
      store = await openSqliteStore({ path, durability: 'normal' });
      server = await startServer({ store, port, closeStore: true });
      const seen = countFrames(server);
      assert.equal((await remote.store.append(stream, [{ type: 'a', data: 2 }])).version, 2);
      assert.deepEqual(seen, { frames: 1, sockets: 1 });
    } finally {
      await remote.store?.close();
      await server?.close();
      await dir.cleanup();
    }
  });

  it('sends an append whose reply was lost again, which the server answers as a duplicate', async () => {
    const dir = tempDir();
    const store = await openSqliteStore({ path: dir.file('events.db'), durability: 'normal' });
    let server: RunningServer | null = null;
    let drops = 0;
    // After writing, the server loses the connection before its reply goes out: the ambiguous case.
    const dropping = new Proxy(store, {
      get(target, key) {
        if (key === 'append') {
          return async (...args: Parameters<EventStore['append']>) => {
            const result = await target.append(...args);
            if (drops > 0) {
              drops--;
              for (const ws of server!.app.websocketServer.clients) ws.terminate();
            }
            return result;
          };
        }
        const value: unknown = Reflect.get(target, key, target);
        return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
      },
    });
    try {
      server = await startServer({ store: dropping, port: 0 });
      const seen = countFrames(server);
      const stream = randomStream();
      const remote = connect(server.url);
      try {
        drops = 1;
        const r = await remote.append(stream, [{ type: 'a', data: 1 }], { expectedVersion: 0 });
        // Written once; the second frame found its event id stored and answered with the original.
        assert.deepEqual([r.version, r.duplicate], [1, true]);
        assert.deepEqual(seen, { frames: 2, sockets: 2 });
      } finally {
        await remote.close();
      }
      // Without attempts left, the caller learns that the outcome is unknown.
      const once = connect(server.url, { attempts: 1 });
      try {
        drops = 1;
        await assert.rejects(
          once.append(stream, [{ type: 'a', data: 2 }]),
          (err: unknown) =>
            err instanceof IdemError &&
            err.code === 'unavailable' &&
            /may or may not have been written/.test(err.message),
        );
      } finally {
        await once.close();
      }
      const events = [];
      for await (const e of store.readStream(stream)) events.push(e.data);
      assert.deepEqual(events, [1, 2], 'each event stored exactly once');
    } finally {
      await server?.close();
      await store.close();
      await dir.cleanup();
    }
  });

  it('ends a socket whose reply does not come within timeoutMs, reporting the append as maybe written', async () => {
    const dir = tempDir();
    const store = await openSqliteStore({ path: dir.file('events.db'), durability: 'normal' });
    let server: RunningServer | null = null;
    // The first append the server makes waits here until the end of the test: its frame gets no reply.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let stall = true;
    const stalling = new Proxy(store, {
      get(target, key) {
        if (key === 'append') {
          return async (...args: Parameters<EventStore['append']>) => {
            if (stall) {
              stall = false;
              await gate;
            }
            return target.append(...args);
          };
        }
        const value: unknown = Reflect.get(target, key, target);
        return typeof value === 'function' ? (value as () => unknown).bind(target) : value;
      },
    });
    try {
      server = await startServer({ store: stalling, port: 0 });
      const seen = countFrames(server);
      const remote = connect(server.url, { attempts: 1, timeoutMs: 1_000 });
      try {
        await assert.rejects(
          remote.append(randomStream(), [{ type: 'a', data: 1 }]),
          (err: unknown) =>
            err instanceof IdemError &&
            err.code === 'unavailable' &&
            /no reply within 1000 ms: the appends may or may not have been written/.test(err.message),
        );
        // The next append goes on a new socket, and is answered.
        assert.equal((await remote.append(randomStream(), [{ type: 'a', data: 2 }])).version, 1);
        assert.deepEqual(seen, { frames: 2, sockets: 2 });
      } finally {
        await remote.close();
      }
    } finally {
      release();
      await server?.close();
      await store.close();
      await dir.cleanup();
    }
  });

  it('keeps a socket whose replies come, however long it is used', () =>
    withServer({}, async (f) => {
      const seen = countFrames(f.server);
      // Replies take a few ms here; appends go on for two and a half times the timeout, one after another.
      const remote = connect(f.url, { attempts: 1, timeoutMs: 1_000 });
      try {
        const stream = randomStream();
        const until = Date.now() + 2_500;
        let version = 0;
        while (Date.now() < until)
          version = (await remote.append(stream, [{ type: 'a', data: version }])).version;
        assert.ok(version > 1);
        assert.deepEqual(seen, { frames: version, sockets: 1 });
      } finally {
        await remote.close();
      }
    }));

  it('sends its frames with a zero masking key: the JSON text as written', () =>
    withServer({}, async (f) => {
      // A TCP relay in front of the server keeps what the client sends.
      const sent: Buffer[] = [];
      const relay = net.createServer((client) => {
        const upstream = net.connect((f.server.app.server.address() as AddressInfo).port, '127.0.0.1');
        client.on('data', (chunk: Buffer) => {
          sent.push(chunk);
          upstream.write(chunk);
        });
        upstream.on('data', (chunk: Buffer) => client.write(chunk));
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
        client.on('error', () => upstream.destroy());
        upstream.on('error', () => client.destroy());
      });
      await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
      const remote = connect(`http://127.0.0.1:${(relay.address() as AddressInfo).port}`);
      try {
        const stream = randomStream();
        await remote.append(stream, [{ type: 'a', data: { n: 1 } }]);
        const bytes = Buffer.concat(sent);
        const headersEnd = bytes.indexOf('\r\n\r\n');
        assert.match(bytes.subarray(0, headersEnd).toString('latin1'), new RegExp(`^GET ${PATH} HTTP/1.1`));
        // The first frame after the upgrade request: FIN and text, masked, then its length.
        const frame = bytes.subarray(headersEnd + 4);
        assert.equal(frame[0], 0x81);
        assert.equal(frame[1]! & 0x80, 0x80, 'the mask bit is set, as RFC 6455 asks of clients');
        const short = frame[1]! & 0x7f;
        const [length, keyAt] =
          short === 126
            ? [frame.readUInt16BE(2), 4]
            : short === 127
              ? [Number(frame.readBigUInt64BE(2)), 10]
              : [short, 2];
        assert.deepEqual([...frame.subarray(keyAt, keyAt + 4)], [0, 0, 0, 0]);
        const payload = JSON.parse(frame.subarray(keyAt + 4, keyAt + 4 + length).toString('utf8')) as {
          type: string;
          appends: { stream: string }[];
        };
        assert.equal(payload.type, 'appends');
        assert.deepEqual(
          payload.appends.map((a) => a.stream),
          [stream],
        );
      } finally {
        await remote.close();
        await new Promise((resolve) => relay.close(resolve));
      }
    }));

  it('reports appends that could not be sent as not sent', async () => {
    // A port nobody listens on.
    const probe = http.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const remote = connect(`http://127.0.0.1:${port}`, { attempts: 2 });
    try {
      await assert.rejects(
        remote.append(randomStream(), [{ type: 'a', data: 1 }]),
        (err: unknown) =>
          err instanceof IdemError && err.code === 'unavailable' && /were not sent$/.test(err.message),
      );
    } finally {
      await remote.close();
    }
  });

  it('sends appends over HTTP to a server without the append socket', () =>
    withServer({}, async (f) => {
      // An older server: the socket's route is unknown (404), every other request reaches the server.
      const older = http.createServer((req, res) => {
        const upstream = http.request(
          `${f.url}${req.url}`,
          { method: req.method, headers: req.headers },
          (r) => {
            res.writeHead(r.statusCode ?? 502, r.headers);
            r.pipe(res);
          },
        );
        req.pipe(upstream);
      });
      older.on('upgrade', (_req, socket) => {
        const body = JSON.stringify({
          error: { code: 'not_found', message: `no route GET ${PATH}`, details: { what: 'route' } },
        });
        socket.end(
          `HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
        );
      });
      await new Promise<void>((resolve) => older.listen(0, '127.0.0.1', resolve));
      const remote = connect(`http://127.0.0.1:${(older.address() as AddressInfo).port}`);
      try {
        const streams = Array.from({ length: 4 }, () => randomStream());
        const lone = await remote.append(streams[0]!, [{ type: 'a', data: 0 }]);
        assert.equal(lone.version, 1);
        const together = await Promise.all(streams.map((s) => remote.append(s, [{ type: 'a', data: 1 }])));
        assert.deepEqual(
          together.map((r) => r.version),
          [2, 1, 1, 1],
        );
        assert.equal(await requests(f, '/v1/streams/:stream/events'), 1);
        assert.equal(await requests(f, '/v1/appends'), 1);
      } finally {
        await remote.close();
        older.closeAllConnections();
        await new Promise((resolve) => older.close(resolve));
      }
    }));
});
