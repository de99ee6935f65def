// Lease renewals of many subscriptions: their heartbeats tick together (AlignedInterval), and the
// backends store renewals made together at once (PostgreSQL: one statement), each with its own
// lease or `fenced`.
import assert from 'node:assert/strict';
import { describe, it, mock } from 'node:test';
import type { EventStore } from '../../src/core/eventStore.js';
import { AlignedInterval } from '../../src/subscriptions/heartbeat.js';
import type { SubscriptionStateBackend } from '../../src/subscriptions/stateBackend.js';
import { pgTestContext } from '../postgres/pgFixtures.js';
import { onEveryStore } from '../support/everyStore.js';

const pg = await pgTestContext();

function backendOf(store: EventStore): SubscriptionStateBackend {
  return (store as unknown as { subscriptions: { backend: SubscriptionStateBackend } }).subscriptions.backend;
}

/** Renewals made in the same turn: each its own lease, a stale epoch `fenced` with the stored one. */
async function renewTogether(store: EventStore): Promise<void> {
  const backend = backendOf(store);
  const epochs: number[] = [];
  for (let i = 0; i < 5; i++) {
    const name = `renewed_${i}_v1`;
    assert.ok((await backend.register(name, {}, 0)).ok);
    const acquired = await backend.acquire(name, 'owner-a', 30_000);
    if (!acquired.ok) assert.fail(`acquire ${name}: ${acquired.reason}`);
    epochs.push(acquired.epoch);
  }
  // The fifth is taken over by another owner: its old epoch is fenced.
  const stolen = await backend.acquire('renewed_4_v1', 'owner-b', 30_000);
  assert.equal(stolen.ok, false, 'a live lease is not taken');
  await backend.release('renewed_4_v1', epochs[4]!);
  const taken = await backend.acquire('renewed_4_v1', 'owner-b', 30_000);
  if (!taken.ok) assert.fail(`acquire after release: ${taken.reason}`);

  const results = await Promise.all(
    epochs.map((epoch, i) => backend.renew(`renewed_${i}_v1`, epoch, 60_000)),
  );
  for (const r of results.slice(0, 4)) {
    if (!r.ok) assert.fail(`renewal fenced: ${JSON.stringify(r)}`);
    const left = Date.parse(r.leaseExpiresAt) - Date.now();
    assert.ok(left > 30_000 && left <= 61_000, `lease renewed for 60 s (${left} ms left)`);
    assert.equal(r.pause, null);
  }
  assert.deepEqual(results[4], { ok: false, reason: 'fenced', currentEpoch: taken.epoch });
}

onEveryStore(pg, 'renewals made together (the state backends)', renewTogether);

describe('PostgreSQL renewals', () => {
  it('PostgreSQL: one statement for all of them', { skip: pg.skip }, async () => {
    const store = await pg.openStore();
    try {
      await renewTogether(store);
      const backend = backendOf(store);
      const statements: string[] = [];
      const query = store.pool.query.bind(store.pool) as (...args: unknown[]) => unknown;
      store.pool.query = ((...args: unknown[]) => {
        const q = args[0] as string | { text: string };
        statements.push(typeof q === 'string' ? q : q.text);
        return query(...args);
      }) as typeof store.pool.query;
      const names = [0, 1, 2, 3].map((i) => `counted_${i}_v1`);
      for (const name of names) await backend.register(name, {}, 0);
      const acquired = await Promise.all(names.map((name) => backend.acquire(name, 'owner-c', 30_000)));
      statements.length = 0;
      const renewed = await Promise.all(
        acquired.map((a, i) => {
          if (!a.ok) assert.fail(`acquire: ${a.reason}`);
          return backend.renew(names[i]!, a.epoch, 60_000);
        }),
      );
      assert.ok(renewed.every((r) => r.ok));
      assert.equal(statements.filter((s) => /lease_expires_at/.test(s)).length, 1, statements.join('\n'));
    } finally {
      await store.close();
    }
  });
});

describe('AlignedInterval', () => {
  it('ticks on multiples of its period, whenever it was started, until stopped', () => {
    mock.timers.enable({ apis: ['setTimeout', 'setInterval', 'Date'], now: 1_000 });
    // In steps of 10 ms: a timer set inside a callback then starts from the callback's time.
    const advance = (ms: number): void => {
      for (let t = 0; t < ms; t += 10) mock.timers.tick(10);
    };
    try {
      const ticks: [string, number][] = [];
      const a = new AlignedInterval(() => ticks.push(['a', Date.now()]), 300);
      advance(130);
      const b = new AlignedInterval(() => ticks.push(['b', Date.now()]), 300);
      advance(770); // to 1,900
      assert.deepEqual(ticks, [
        ['a', 1_200],
        ['b', 1_200],
        ['a', 1_500],
        ['b', 1_500],
        ['a', 1_800],
        ['b', 1_800],
      ]);
      a.stop();
      advance(300);
      assert.deepEqual(ticks.slice(6), [['b', 2_100]]);
      b.stop();
      // Stopped before its first tick: it never ticks.
      const c = new AlignedInterval(() => ticks.push(['c', Date.now()]), 300);
      c.stop();
      advance(1_000);
      assert.equal(ticks.length, 7);
    } finally {
      mock.timers.reset();
    }
  });
});
