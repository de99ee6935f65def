// verifyConsumer's scenarios that the examples do not reach: version gaps under both gap policies,
// a poison event under a dead-letter policy, an effect key that changes between runs, bad options.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type Database from 'better-sqlite3';
import { createConsumer } from '../../src/index.js';
import type { SqliteTarget } from '../../src/sqlite/index.js';
import { verifyConsumer, type ConsumerFactory, type TestEvent } from '../../src/testkit/index.js';

const events: TestEvent[] = Array.from({ length: 40 }, (_, i) => ({
  stream: `order-${i % 4}`,
  type: i % 4 === 3 ? 'order.shipped' : 'order.changed',
  data: { n: i },
}));

/** The last event of each order: an entity-version projection. */
function projection(
  options: Partial<Parameters<typeof createConsumer<Database.Database>>[0]> = {},
): ConsumerFactory<SqliteTarget> {
  return (source, target, { version }) => {
    target.db.exec(
      `CREATE TABLE IF NOT EXISTS orders_v${version} (id TEXT PRIMARY KEY, last INTEGER NOT NULL, version INTEGER NOT NULL)`,
    );
    const put = target.db.prepare(
      `INSERT INTO orders_v${version} VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET last = excluded.last, version = excluded.version`,
    );
    return createConsumer<Database.Database>({
      name: `orders_v${version}`,
      source,
      target,
      guard: 'entity-version',
      handle: (e) => {
        put.run(e.stream, (e.data as { n: number }).n, e.version);
      },
      onError: { attempts: 2, backoff: 'none' },
      ...options,
    } as Parameters<typeof createConsumer<Database.Database>>[0]);
  };
}

const readOrders = (target: SqliteTarget, { version }: { version: number }): unknown =>
  target.db.prepare(`SELECT * FROM orders_v${version} ORDER BY id`).all();

const scenario = (r: Awaited<ReturnType<typeof verifyConsumer>>, id: string) =>
  r.scenarios.find((s) => s.id === id)!;

describe('verifyConsumer', () => {
  it('delivers a version early to an entity-version projection: recovered from the store', async () => {
    const r = await verifyConsumer<SqliteTarget>({ consumer: projection(), read: readOrders, events });
    assert.equal(r.ok, true, JSON.stringify(r.statements));
    const gap = scenario(r, 'version-gap');
    assert.equal(gap.outcome, 'ok');
    assert.match(gap.notes.join('\n'), /order-\d v\d+ delivered before v\d+/);
  });

  it("with gaps: 'fail' the consumer stops on the gap: an explicit policy that holds", async () => {
    const r = await verifyConsumer<SqliteTarget>({
      consumer: projection({ gaps: 'fail' }),
      read: readOrders,
      events,
    });
    assert.equal(r.statements.find((s) => s.id === 'gaps-and-duplicates')!.verdict, 'holds');
    assert.match(scenario(r, 'version-gap').notes.join('\n'), /stopped on the gap/);
  });

  it('a poison event under a dead-letter policy is parked, retried after the fix, and the state matches', async () => {
    const r = await verifyConsumer<SqliteTarget>({
      consumer: projection({
        guard: 'event-id',
        onError: { attempts: 2, backoff: 'none', then: 'dead-letter' },
      }),
      read: readOrders,
      events,
    });
    assert.equal(r.ok, true, JSON.stringify(r.statements));
    assert.match(scenario(r, 'poison').notes.join('\n'), /dead-lettered position \d+; retried/);
  });

  it('an effect key that changes between runs fails "every effect has a stable deduplication key"', async () => {
    const consumer: ConsumerFactory<SqliteTarget> = (source, target, { version }) =>
      createConsumer<Database.Database>({
        name: `mailer_v${version}`,
        source,
        target,
        handle: async (e, ctx) => {
          await ctx.effect('mail', { order: e.stream }, { key: randomUUID() });
        },
      });
    const r = await verifyConsumer<SqliteTarget>({
      consumer,
      read: () => null,
      events: events.slice(0, 6),
      shrinkRuns: 10,
    });
    const s = r.statements.find((x) => x.id === 'stable-keys')!;
    assert.equal(s.verdict, 'fails');
    // Every run records keys the clean run never had: the first scenario after it shows it.
    assert.equal(s.failure!.scenario, 'twice');
    assert.match(s.failure!.message, /recorded effects differ from the clean run: 1 new .*, 1 missing/);
    assert.equal(s.failure!.events.length, 1);
  });

  it('refuses options it cannot run, naming the field', async () => {
    const consumer = projection();
    await assert.rejects(verifyConsumer<SqliteTarget>({ consumer, read: readOrders, events: [] }), {
      code: 'invalid_input',
      message: /events: must hold at least one event/,
    });
    await assert.rejects(
      verifyConsumer<SqliteTarget>({ consumer, read: readOrders, events, timeoutMs: 10 }),
      /timeoutMs: must be an integer from 1000 to 600000/,
    );
    await assert.rejects(
      verifyConsumer({ consumer, read: readOrders, events, colour: 'red' } as never),
      /colour/,
    );
  });
});
