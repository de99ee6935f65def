// A real server on SQLite and on PostgreSQL: consumer rows written before the limits (an absurd
// lease, a huge filter) keep every admin route and /metrics working, names with control characters
// are 400 (never a PostgreSQL 500), and WebSocket subscriptions outside the bounds are refused.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventStore } from '../../src/core/eventStore.js';
import { startServer, type RunningServer } from '../../src/server/startServer.js';
import type { TokenConfig } from '../../src/server/tokens.js';
import { openSqliteStore, type SqliteEventStore } from '../../src/sqlite/sqliteStore.js';
import { pgTestContext } from '../postgres/pgFixtures.js';
import { randomConsumer } from '../support/names.js';
import { tempDir } from '../support/tempDir.js';
import { errorCode, WsPeer } from './wsPeer.js';

const pg = await pgTestContext();

const TOKENS: TokenConfig[] = [
  { name: 'ops', token: 'admin-secret', scopes: ['admin'] },
  { name: 'sub', token: 'sub-secret', scopes: ['subscribe'] },
];
const ADMIN = { authorization: 'Bearer admin-secret' };
/** About 8.9e15 ms from now: a lease ending in the year 284056, as an unbounded TTL once stored. */
const HUGE_TTL_MS = 8.9e15;

interface Target {
  store: EventStore;
  /** Writes what an older server let a client store: a lease of `HUGE_TTL_MS`, a filter of `types`. */
  forgeLease: (name: string, owner: string) => Promise<void>;
  forgeFilter: (name: string, types: string[]) => Promise<void>;
  cleanup: () => Promise<void>;
}

async function sqliteTarget(): Promise<Target> {
  const dir = tempDir();
  const store: SqliteEventStore = await openSqliteStore({ path: dir.file('events.db') });
  return {
    store,
    forgeLease: (name, owner) => {
      store.db
        .prepare(
          `UPDATE idem_consumers SET owner = ?, lease_expires_at = ?, status = 'running' WHERE name = ?`,
        )
        .run(owner, Date.now() + HUGE_TTL_MS, name);
      return Promise.resolve();
    },
    forgeFilter: (name, types) => {
      const filter = JSON.stringify({ types });
      store.db
        .prepare(`UPDATE idem_consumers SET filter = ?, filter_key = ? WHERE name = ?`)
        .run(filter, filter, name);
      return Promise.resolve();
    },
    cleanup: async () => {
      await store.close();
      await dir.cleanup();
    },
  };
}

async function postgresTarget(): Promise<Target> {
  const store = await pg.openStore();
  const table = `"${store.schema}".consumers`;
  return {
    store,
    forgeLease: async (name, owner) => {
      await store.pool.query(
        `UPDATE ${table} SET owner = $2, status = 'running',
           lease_expires_at = now() + $3::bigint * interval '1 millisecond' WHERE name = $1`,
        [name, owner, HUGE_TTL_MS],
      );
    },
    forgeFilter: async (name, types) => {
      const filter = JSON.stringify({ types });
      await store.pool.query(
        `UPDATE ${table} SET filter = $2::jsonb, filter_key = $2::text WHERE name = $1`,
        [name, filter],
      );
    },
    cleanup: () => store.close(),
  };
}

async function withServer(
  make: () => Promise<Target>,
  fn: (t: Target, server: RunningServer) => Promise<void>,
) {
  const target = await make();
  let server: RunningServer | undefined;
  try {
    server = await startServer({ store: target.store, port: 0, tokens: TOKENS });
    await fn(target, server);
  } finally {
    await server?.close();
    await target.cleanup();
  }
}

async function call(
  server: RunningServer,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = ADMIN,
): Promise<{ status: number; json: Record<string, unknown> & { error?: { code: string } } }> {
  const res = await fetch(server.url + path, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    json = { text };
  }
  return { status: res.status, json };
}

for (const [kind, make, skip] of [
  ['SQLite', sqliteTarget, false],
  ['PostgreSQL', postgresTarget, pg.skip],
] as const) {
  describe(`a server on ${kind} hardened against stored and sent abuse`, { skip }, () => {
    it('lists, shows, releases, resets and deletes consumers stored with a year-284056 lease or 40,000 types; /metrics answers', () =>
      withServer(make, async ({ store, forgeLease, forgeFilter }, server) => {
        await store.append('inv-1', [{ type: 'a', data: 1 }]);
        const [fine, leased, wide] = [
          randomConsumer('fine'),
          randomConsumer('leased'),
          randomConsumer('wide'),
        ];
        for (const name of [fine, leased, wide]) await (await store.subscribe(name)).close();
        await forgeLease(leased, 'attacker');
        await forgeFilter(
          wide,
          Array.from({ length: 40_000 }, (_, i) => `t${i}`),
        );

        const list = await call(server, 'GET', '/v1/consumers');
        assert.equal(list.status, 200, JSON.stringify(list.json).slice(0, 300));
        const byName = new Map(
          (
            list.json.consumers as { name: string; error?: { code: string }; leaseExpiresAt: string | null }[]
          ).map((c) => [c.name, c]),
        );
        assert.deepEqual([...byName.keys()].sort(), [fine, leased, wide].sort());
        assert.equal(byName.get(fine)!.error, undefined);
        assert.equal(
          byName.get(wide)!.error?.code,
          'invalid_input',
          'the bad consumer is shown with its error',
        );
        assert.match(
          String(byName.get(leased)!.leaseExpiresAt),
          /^\+275760-/,
          'the lease shows as the latest date',
        );

        const metrics = await fetch(`${server.url}/metrics`, { headers: ADMIN });
        const text = await metrics.text();
        assert.equal(metrics.status, 200, text.slice(0, 300));
        assert.match(text, new RegExp(`idem_consumer_position\\{consumer="${wide}"\\}`));
        assert.match(text, new RegExp(`idem_consumer_lag_events\\{consumer="${fine}"\\}`));
        assert.doesNotMatch(text, new RegExp(`idem_consumer_lag_events\\{consumer="${wide}"\\}`));

        assert.equal((await call(server, 'GET', `/v1/consumers/${leased}`)).status, 200);
        assert.equal((await call(server, 'GET', `/v1/consumers/${wide}`)).status, 200);
        const busy = await call(server, 'POST', `/v1/consumers/${leased}/reset`, { position: 0 });
        assert.equal(busy.status, 409);
        assert.equal(busy.json.error?.code, 'consumer_busy');
        assert.equal(
          (
            await call(server, 'POST', `/v1/consumers/${leased}/release`, undefined, {
              authorization: 'Bearer sub-secret',
            })
          ).status,
          403,
          'release needs the admin scope',
        );
        const released = await call(server, 'POST', `/v1/consumers/${leased}/release`);
        assert.equal(released.status, 200, JSON.stringify(released.json));
        assert.equal(released.json.owner, null);
        assert.equal(released.json.status, 'stopped');
        assert.equal(
          (await call(server, 'POST', `/v1/consumers/${leased}/reset`, { position: 0 })).status,
          200,
        );
        assert.equal((await call(server, 'DELETE', `/v1/consumers/${leased}`)).status, 200);
        assert.equal((await call(server, 'DELETE', `/v1/consumers/${wide}`)).status, 200);
        assert.equal((await call(server, 'POST', `/v1/consumers/${randomConsumer()}/release`)).status, 404);
      }));

    it('answers 400 invalid_input for control characters and lone surrogates in names, never 500', () =>
      withServer(make, async ({ store }, server) => {
        const name = randomConsumer();
        await (await store.subscribe(name)).close();
        const probes: [string, string, unknown][] = [
          ['GET', '/v1/events?types=a%00b', undefined],
          ['GET', '/v1/events?categories=x%01', undefined],
          ['GET', '/v1/events?streamPrefixes=%00', undefined],
          ['GET', '/v1/streams/a%00b/events', undefined],
          ['POST', `/v1/consumers/${name}/dead-letters/retry`, { id: 'a\u0000b' }],
          ['POST', `/v1/consumers/${name}/dead-letters/skip`, { stream: 'inv-\u00001' }],
          ['POST', `/v1/consumers/${name}/dead-letters/skip`, { stream: 'inv-1', by: 'ops\u0000' }],
          ['POST', '/v1/streams/inv-1/events', { events: [{ type: 'a\u0000b', data: 1 }] }],
          // JSON text with an escaped lone surrogate: it would be stored as U+FFFD.
          ['POST', '/v1/streams/inv-1/events', '{"events":[{"type":"order.\\ud83d","data":1}]}'],
          ['POST', '/v1/streams/inv-%ED%A0%BD/events', { events: [{ type: 'a', data: 1 }] }],
        ];
        for (const [method, path, body] of probes) {
          const r = await call(server, method, path, body);
          assert.equal(r.status, 400, `${method} ${path} ${JSON.stringify(body)}: ${JSON.stringify(r.json)}`);
          assert.equal(r.json.error?.code, 'invalid_input');
        }
        assert.equal(await store.headPosition(), 0, 'nothing was appended');
      }));

    it('refuses WebSocket subscriptions with a lease, batch, window or filter outside the bounds', () =>
      withServer(make, async ({ store }, server) => {
        const peer = await WsPeer.open(server.url, { token: 'sub-secret' });
        try {
          const cases: [Record<string, unknown>, string][] = [
            [{ leaseTtlMs: HUGE_TTL_MS }, 'leaseTtlMs'],
            [{ leaseTtlMs: 6.5e9 }, 'leaseTtlMs'],
            [{ batchSize: 1e9, maxInFlight: 1e9 }, 'maxInFlight'],
            [{ batchSize: 1e9 }, 'batchSize'],
            [{ filter: { types: Array.from({ length: 40_000 }, (_, i) => `t${i}`) } }, 'filter.types'],
            [{ filter: { types: ['a\u0000b'] } }, 'filter.types[0]'],
          ];
          let req = 0;
          for (const [options, field] of cases) {
            req++;
            peer.send({ type: 'subscribe', sub: `s${req}`, consumer: randomConsumer(), req, ...options });
            const reply = await peer.reply(req);
            assert.equal(errorCode(reply), 'invalid_input', JSON.stringify(reply).slice(0, 200));
            assert.equal((reply.error as { details: { field: string } }).details.field, field);
          }
          assert.deepEqual(await store.consumers.list(), [], 'nothing was registered');
        } finally {
          await peer.close();
        }
      }));
  });
}
