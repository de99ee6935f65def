// Every public factory refuses an options key it does not know, naming it and suggesting the closest
// known one. (The store methods are covered by the EventStore behaviour suite, for every store.)
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { Registry } from 'prom-client';
import { connect } from '../../src/client/connect.js';
import { createConsumer } from '../../src/consumer/index.js';
import type { EventStore } from '../../src/core/eventStore.js';
import { checkKnownKeys, closest, editDistance } from '../../src/core/knownKeys.js';
import { listEffects } from '../../src/effects/admin.js';
import { createEffectDispatcher } from '../../src/effects/dispatcher.js';
import { rebuildConsumer } from '../../src/consumer/rebuild.js';
import { promoteConsumer } from '../../src/effects/versions.js';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { openPostgresStore } from '../../src/postgres/postgresStore.js';
import { postgresTarget } from '../../src/postgres/target.js';
import { createServer } from '../../src/server/createServer.js';
import { startServer } from '../../src/server/startServer.js';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { sqliteTarget, type SqliteTarget } from '../../src/sqlite/target.js';
import { rejectsWith } from '../store/suite/context.js';
import { makeSqliteFixture } from '../effects/support/fixture.js';
import { POSTGRES_URL, tempDir, type TempDir } from '../support/index.js';

/** Passes what the types would refuse, as JavaScript callers and configuration read at run time can. */
const raw = (x: unknown): never => x as never;

interface Fixture {
  dir: TempDir;
  store: EventStore;
  target: SqliteTarget;
  pool: pg.Pool;
}

/** [entry point, call, field named, closest known key suggested (null: none is near)] */
type Case = [string, (f: Fixture) => unknown, string, string | null];

const handle = (): void => undefined;
const consumer = (f: Fixture, extra: object): unknown =>
  createConsumer(raw({ name: 'strict_v1', source: f.store, target: f.target, handle, ...extra }));

const cases: Case[] = [
  ['createMemoryStore', () => createMemoryStore(raw({ limts: {} })), 'limts', 'limits'],
  [
    'createMemoryStore limits',
    () => createMemoryStore({ limits: raw({ maxEventByte: 10 }) }),
    'limits.maxEventByte',
    'maxEventBytes',
  ],
  [
    'openSqliteStore',
    (f) => openSqliteStore(raw({ path: f.dir.file('store.db'), durabilty: 'full' })),
    'durabilty',
    'durability',
  ],
  [
    'openSqliteStore create',
    (f) => openSqliteStore(raw({ path: f.dir.file('store.db'), creat: false })),
    'creat',
    'create',
  ],
  [
    'openPostgresStore',
    () => openPostgresStore(raw({ connectionString: POSTGRES_URL, shema: 'x' })),
    'shema',
    'schema',
  ],
  [
    'openPostgresStore retry',
    () => openPostgresStore({ connectionString: POSTGRES_URL, retry: raw({ attempt: 2 }) }),
    'retry.attempt',
    'attempts',
  ],
  [
    'openPostgresStore limits',
    () => openPostgresStore({ connectionString: POSTGRES_URL, limits: raw({ maxAppendEvent: 2 }) }),
    'limits.maxAppendEvent',
    'maxAppendEvents',
  ],
  [
    'sqliteTarget',
    (f) => sqliteTarget(f.dir.file('target.db'), raw({ busyTimeout: 5 })),
    'options.busyTimeout',
    'busyTimeoutMs',
  ],
  ['postgresTarget', (f) => postgresTarget(f.pool, raw({ shcema: 'x' })), 'options.shcema', 'schema'],
  ['createConsumer', (f) => consumer(f, { bacth: { size: 5 } }), 'bacth', 'batch'],
  ['createConsumer, an unrelated key', (f) => consumer(f, { colour: 'red' }), 'colour', null],
  ['createConsumer handler', (f) => consumer(f, { handler: handle }), 'handler', 'handle'],
  ['createConsumer batch', (f) => consumer(f, { batch: { sise: 5 } }), 'batch.sise', 'size'],
  ['createConsumer onError', (f) => consumer(f, { onError: { attempt: 2 } }), 'onError.attempt', 'attempts'],
  [
    'createConsumer reconnect',
    (f) => consumer(f, { reconnect: { initialDelay: 1 } }),
    'reconnect.initialDelay',
    'initialDelayMs',
  ],
  [
    'createConsumer metrics',
    (f) => consumer(f, { metrics: { registry: new Registry(), prefx: 'x_' } }),
    'metrics.prefx',
    'prefix',
  ],
  [
    'createConsumer filter',
    (f) => consumer(f, { filter: { streamPrefix: ['a'] } }),
    'filter.streamPrefix',
    'streamPrefixes',
  ],
  ['createConsumer guard', (f) => consumer(f, { guard: { key: () => 'k', nam: 'k' } }), 'guard.nam', 'name'],
  ['createConsumer effects', (f) => consumer(f, { effects: { scop: 'x' } }), 'effects.scop', 'scope'],
  [
    'createConsumer effects.dispatcher',
    (f) => consumer(f, { effects: { handlers: {}, dispatcher: { leaseMS: 5 } } }),
    'effects.dispatcher.leaseMS',
    'leaseMs',
  ],
  [
    'createEffectDispatcher',
    (f) => createEffectDispatcher(raw({ target: f.target, handlers: {}, pollInterval: 5 })),
    'pollInterval',
    'pollIntervalMs',
  ],
  [
    'createEffectDispatcher retry',
    (f) => createEffectDispatcher({ target: f.target, handlers: {}, retry: raw({ backof: 'fixed' }) }),
    'retry.backof',
    'backoff',
  ],
  [
    'rebuildConsumer',
    (f) =>
      rebuildConsumer(
        raw({
          source: f.store,
          target: f.target,
          handle,
          from: 'strict_v1',
          as: 'strict_v2',
          progressInterval: 5,
        }),
      ),
    'progressInterval',
    'progressIntervalMs',
  ],
  ['listEffects', (f) => listEffects(f.target, raw({ limt: 5 })), 'options.limt', 'limit'],
  [
    'promoteConsumer',
    (f) => promoteConsumer(raw({ source: f.store, target: f.target, name: 'strict_v1', force: true })),
    'force',
    null,
  ],
  ['createServer', (f) => createServer(raw({ store: f.store, heartbeat: 5 })), 'heartbeat', 'heartbeatMs'],
  [
    'createServer limits',
    (f) => createServer({ store: f.store, limits: raw({ maxBodyByte: 5 }) }),
    'limits.maxBodyByte',
    'maxBodyBytes',
  ],
  ['startServer', (f) => startServer(raw({ store: f.store, prot: 0 })), 'prot', 'port'],
  ['connect', () => connect('http://127.0.0.1:1', raw({ tokn: 'x' })), 'options.tokn', 'token'],
];

/** The call as a promise: a synchronous throw becomes its rejection. */
async function settled(call: () => unknown): Promise<unknown> {
  return call();
}

describe('unknown option keys of every public factory', () => {
  let f: Fixture;
  before(async () => {
    const dir = tempDir();
    f = {
      dir,
      store: createMemoryStore(),
      target: sqliteTarget(dir.file('target.db')),
      pool: new pg.Pool({ connectionString: POSTGRES_URL, max: 1 }),
    };
  });
  after(async () => {
    await f.target.close();
    await f.pool.end();
    await f.store.close();
    await f.dir.cleanup();
  });

  for (const [what, call, field, suggestion] of cases) {
    it(`${what} refuses ${field}${suggestion ? ` (did you mean ${suggestion}?)` : ''}`, async () => {
      const err = await rejectsWith(
        settled(() => call(f)),
        'invalid_input',
        field,
      );
      if (suggestion === null) assert.doesNotMatch(err.message, /did you mean/);
      else assert.ok(err.message.endsWith(`unknown option; did you mean ${suggestion}?`), err.message);
    });
  }

  it('a refused openSqliteStore creates no file', async () => {
    const path = f.dir.file('never/store.db');
    await rejectsWith(openSqliteStore(raw({ path, readPagesize: 10 })), 'invalid_input', 'readPagesize');
    assert.equal(existsSync(path), false);
  });
});

describe('checkKnownKeys', () => {
  it('lets known keys and an omitted object pass, and refuses what is not a plain object', () => {
    const known = { alpha: true, beta: true };
    checkKnownKeys({ alpha: 1 }, known, 'options');
    checkKnownKeys({}, known, 'options');
    checkKnownKeys(undefined, known, 'options');
    for (const bad of [null, 3, 'x', [1]]) {
      assert.throws(() => checkKnownKeys(bad, known, 'options'), { message: 'options: must be an object' });
    }
    assert.throws(() => checkKnownKeys(null, known, ''), { message: 'options: must be an object' });
  });

  it('lists the known keys when none is near', () => {
    assert.throws(() => checkKnownKeys({ zzz: 1 }, { alpha: true, beta: true }, 'o'), {
      message: 'o.zzz: unknown option (known: alpha, beta)',
    });
  });

  it('ignores inherited keys', () => {
    const o = Object.create({ inherited: 1 }) as object;
    checkKnownKeys(o, { alpha: true }, 'options');
  });

  it('counts a swapped pair as one edit, and ignores case', () => {
    assert.equal(editDistance('expectedversoin', 'expectedversion'), 1);
    assert.equal(editDistance('bacth', 'batch'), 1);
    assert.equal(editDistance('', 'abc'), 3);
    assert.equal(editDistance('kitten', 'sitting'), 3);
    assert.equal(closest('LEASEMS', ['leaseMs', 'owner']), 'leaseMs');
    assert.equal(closest('limit', ['after', 'filter']), undefined);
    assert.equal(closest('partitons', ['partitions', 'batch']), 'partitions');
  });
});

describe('unknown option keys inside a handler', () => {
  it('ctx.effect refuses a misspelt key option, so the effect is not recorded under the default key', async () => {
    const fx = await makeSqliteFixture();
    const errors: string[] = [];
    const c = createConsumer({
      name: 'strict_effects_v1',
      source: fx.store,
      target: fx.target,
      onError: { attempts: 1, then: 'dead-letter' },
      handle: async (_e, ctx) => {
        try {
          await ctx.effect('email', {}, raw({ kye: 'receipt-1' }));
        } catch (err) {
          errors.push((err as Error).message);
          throw err;
        }
      },
    });
    try {
      await fx.store.append('invoice-1', [{ type: 'invoice.issued', data: {} }]);
      await c.start();
      await c.whenCaughtUp({ timeoutMs: 10_000 });
      assert.equal(errors[0], 'options.kye: unknown option; did you mean key?');
      assert.deepEqual(await listEffects(fx.target), []);
    } finally {
      await c.stop();
      await fx.cleanup();
    }
  });
});
