import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { connect } from '../../src/client/connect.js';
import { createConsumer, type Consumer } from '../../src/consumer/consumer.js';
import type { ErrorPolicy } from '../../src/consumer/options.js';
import { startServer } from '../../src/server/startServer.js';
import type { ConsumerTarget } from '../../src/core/consumerTarget.js';
import type { EventStore } from '../../src/core/eventStore.js';
import type { ConsumerInfo } from '../../src/core/subscription.js';
import { streamPartition } from '../../src/core/streamHash.js';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { fastTests } from '../support/fast.js';
import { randomCategory, randomConsumer, randomSuffix } from '../support/names.js';
import { tempDir } from '../support/tempDir.js';
import { until } from '../support/until.js';
import { pgTestContext } from '../postgres/pgFixtures.js';
import { makeSqliteFixture, postgresFixtures, type MakeTargetFixture } from './support/targetFixture.js';

type MakeStore = () => Promise<{ store: EventStore; cleanup: () => Promise<void> }>;

const pg = await pgTestContext();
const pgTargets = postgresFixtures();
after(() => pgTargets.close());

const LEASE_TTL_MS = 1_000;
const PARTITIONS = 9;

/** Consumer groups with members in one process, over a store and a target. */
function describeConsumerGroups<Tx>(
  label: string,
  makeStore: MakeStore,
  makeTarget: MakeTargetFixture<Tx>,
): void {
  describe(`consumer groups (${label})`, () => {
    async function withGroup(
      fn: (g: {
        store: EventStore;
        name: string;
        target: ConsumerTarget<Tx>;
        member(options?: {
          partitions?: number;
          partitionConcurrency?: number;
          handle?: (stream: string, version: number) => void | Promise<void>;
          onError?: ErrorPolicy;
        }): Consumer;
        append(streams: string[], perStream: number): Promise<Map<string, number>>;
        totals(): Promise<Map<string, { total: number; events: number }>>;
        handled: { stream: string; version: number }[];
      }) => Promise<void>,
    ): Promise<void> {
      const { store, cleanup } = await makeStore();
      const fx = await makeTarget();
      const table = `out_${randomSuffix()}`;
      const name = randomConsumer('g');
      const members: Consumer[] = [];
      const handled: { stream: string; version: number }[] = [];
      try {
        await fx.createTable(table);
        await fn({
          store,
          name,
          target: fx.target,
          handled,
          member: (options = {}) => {
            const c = createConsumer<Tx>({
              name,
              source: store,
              target: fx.target,
              partitions: options.partitions ?? PARTITIONS,
              ...(options.partitionConcurrency !== undefined && {
                partitionConcurrency: options.partitionConcurrency,
              }),
              leaseTtlMs: LEASE_TTL_MS,
              reconnect: { initialDelayMs: 5, maxDelayMs: 20 },
              ...(options.onError && { onError: options.onError }),
              handle: async (e, ctx) => {
                await fx.add(ctx.tx, table, e.stream, (e.data as { amount: number }).amount);
                await options.handle?.(e.stream, e.version);
                handled.push({ stream: e.stream, version: e.version });
              },
            });
            members.push(c);
            return c;
          },
          append: async (streams, perStream) => {
            const expected = new Map<string, number>();
            for (let i = 1; i <= perStream; i++) {
              for (const s of streams) {
                await store.append(s, [{ type: 'amount.added', data: { amount: i } }]);
                expected.set(s, (expected.get(s) ?? 0) + i);
              }
            }
            return expected;
          },
          totals: () => fx.totals(table),
        });
      } finally {
        for (const m of members) await m.stop().catch(() => undefined);
        await fx.cleanup();
        await cleanup();
      }
    }

    /** Each entity's versions handled in order, each once (no rollback happens in these tests). */
    function assertInOrderOnce(handled: { stream: string; version: number }[], perStream: number): void {
      const last = new Map<string, number>();
      for (const h of handled) {
        assert.equal(
          h.version,
          (last.get(h.stream) ?? 0) + 1,
          `${h.stream} v${h.version} after v${last.get(h.stream)}`,
        );
        last.set(h.stream, h.version);
      }
      for (const v of last.values()) assert.equal(v, perStream);
    }

    it('three members share the partitions (at most ceil(N/members) each), each event once, each entity in order', () =>
      withGroup(async (g) => {
        const c = randomCategory('acct');
        const streams = Array.from({ length: 60 }, (_, i) => `${c}-${i}`);
        const before = await g.append(streams, 2);
        const members = [g.member(), g.member(), g.member()];
        for (const m of members) await m.start();
        await until(() => members.every((m) => (m.status().partitions?.length ?? 0) === PARTITIONS / 3), {
          message: 'an even share',
        });
        const later = await g.append(streams, 3);
        const expected = new Map([...before].map(([s, t]) => [s, t + later.get(s)!]));
        await members[0]!.whenCaughtUp({ timeoutMs: 20_000 });
        const totals = await g.totals();
        assert.deepEqual(new Map([...totals].map(([s, t]) => [s, t.total])), expected);
        assertInOrderOnce(g.handled, 5);
        const info = await g.store.consumers.get(g.name);
        assert.equal(info.partitions?.length, PARTITIONS);
        const owners = new Set(info.partitions.map((p) => p.owner));
        assert.equal(owners.size, 3, 'three owners');
        assert.ok(info.partitions.every((p) => p.lag === 0 && p.epoch >= 1));
        assert.equal(info.lag, 0);
        // No partition is held by two members.
        const held = members.flatMap((m) => m.status().partitions!.map((p) => p.index));
        assert.equal(new Set(held).size, PARTITIONS);
        // Every member processed events.
        for (const m of members) assert.ok(m.metrics().processed > 0, `${m.status().member} processed`);
      }));

    it('members started at the same moment all join: none sees the group half registered', () =>
      withGroup(async (g) => {
        const c = randomCategory('acct');
        const streams = Array.from({ length: 30 }, (_, i) => `${c}-${i}`);
        const expected = await g.append(streams, 2);
        const members = [g.member(), g.member(), g.member()];
        await Promise.all(members.map((m) => m.start()));
        await until(() => members.every((m) => (m.status().partitions?.length ?? 0) === PARTITIONS / 3), {
          message: 'an even share',
        });
        await members[0]!.whenCaughtUp({ timeoutMs: 20_000 });
        const totals = await g.totals();
        assert.deepEqual(new Map([...totals].map(([s, t]) => [s, t.total])), expected);
        assertInOrderOnce(g.handled, 2);
      }));

    it('a member that stops hands its partitions to the others; one that joins takes its share', () =>
      withGroup(async (g) => {
        const c = randomCategory('acct');
        const streams = Array.from({ length: 30 }, (_, i) => `${c}-${i}`);
        let expected = await g.append(streams, 2);
        const a = g.member();
        const b = g.member();
        await a.start();
        await b.start();
        await until(() => a.status().partitions!.length + b.status().partitions!.length === PARTITIONS, {
          message: 'all partitions held',
        });
        await b.stop();
        await until(() => a.status().partitions!.length === PARTITIONS, {
          message: 'a takes over everything',
        });
        const more = await g.append(streams, 2);
        expected = new Map([...expected].map(([s, t]) => [s, t + more.get(s)!]));
        await a.whenCaughtUp({ timeoutMs: 20_000 });
        const joiner = g.member();
        await joiner.start();
        await until(
          () =>
            joiner.status().partitions!.length === Math.floor(PARTITIONS / 2) &&
            a.status().partitions!.length <= 5,
          { message: 'the joiner takes its share', timeoutMs: 15_000 },
        );
        const last = await g.append(streams, 1);
        expected = new Map([...expected].map(([s, t]) => [s, t + last.get(s)!]));
        await joiner.whenCaughtUp({ timeoutMs: 20_000 });
        const totals = await g.totals();
        assert.deepEqual(new Map([...totals].map(([s, t]) => [s, t.total])), expected);
        assertInOrderOnce(g.handled, 5);
      }));

    it('members joining one by one settle with every partition held once and none above ceil(N/members)', () =>
      withGroup(async (g) => {
        // 10 partitions: the shares are uneven for 3 members (ceil 4) and 4 members (ceil 3).
        const count = 10;
        const c = randomCategory('acct');
        const streams = Array.from({ length: 40 }, (_, i) => `${c}-${i}`);
        let expected = await g.append(streams, 1);
        const members: Consumer[] = [];
        for (let n = 1; n <= 4; n++) {
          // Each joins while the ones before still hold the shares of a smaller group.
          const m = g.member({ partitions: count });
          await m.start();
          members.push(m);
          const share = Math.ceil(count / n);
          await until(
            () => {
              const held = members.flatMap((x) => x.status().partitions!.map((p) => p.index));
              return (
                held.length === count &&
                new Set(held).size === count &&
                members.every((x) => x.status().partitions!.length <= share)
              );
            },
            { message: `${n} members settled, each at most ${share}`, timeoutMs: 15_000 },
          );
          const more = await g.append(streams, 1);
          expected = new Map([...expected].map(([s, t]) => [s, t + more.get(s)!]));
        }
        await members[0]!.whenCaughtUp({ timeoutMs: 20_000 });
        const totals = await g.totals();
        assert.deepEqual(new Map([...totals].map(([s, t]) => [s, t.total])), expected);
        assertInOrderOnce(g.handled, 5);
      }));

    it('partitionConcurrency: a member runs at most that many batches of its partitions at once', () =>
      withGroup(async (g) => {
        const c = randomCategory('acct');
        const streams = Array.from({ length: 60 }, (_, i) => `${c}-${i}`);
        // A batch's events are handled one after the other: handlers running at once in one member
        // are batches of different partitions running at once.
        const running = [0, 0];
        const most = [0, 0];
        const members = [1, 2].map((limit, i) =>
          g.member({
            partitionConcurrency: limit,
            handle: async () => {
              running[i]!++;
              most[i] = Math.max(most[i]!, running[i]!);
              await new Promise((resolve) => setTimeout(resolve, 1));
              running[i]!--;
            },
          }),
        );
        for (const m of members) await m.start();
        await until(
          () =>
            members.every((m) => (m.status().partitions?.length ?? 0) > 0) &&
            members.reduce((n, m) => n + m.status().partitions!.length, 0) === PARTITIONS,
          { message: 'every partition held, by both members' },
        );
        const expected = await g.append(streams, 3);
        await members[0]!.whenCaughtUp({ timeoutMs: 30_000 });
        const totals = await g.totals();
        assert.deepEqual(new Map([...totals].map(([s, t]) => [s, t.total])), expected);
        assertInOrderOnce(g.handled, 3);
        assert.ok(most[0]! <= 1, `member 1 ran ${most[0]} batches at once`);
        assert.ok(most[1]! <= 2, `member 2 ran ${most[1]} batches at once`);
        for (const m of members) assert.ok(m.metrics().processed > 0, `${m.status().member} processed`);
        await assert.rejects(
          async () => g.member({ partitionConcurrency: 0 }).start(),
          (err: unknown) => (err as { code?: string; field?: string }).code === 'invalid_input',
        );
        assert.throws(
          () =>
            createConsumer({
              name: g.name,
              source: g.store,
              target: g.target,
              partitionConcurrency: 1,
              handle: () => undefined,
            }),
          (err: unknown) => (err as { code?: string }).code === 'invalid_input',
        );
      }));

    it('another partition count, or none, under the same name is consumer_identity_conflict', () =>
      withGroup(async (g) => {
        await g.append([`${randomCategory()}-1`], 1);
        const m = g.member();
        await m.start();
        await assert.rejects(g.member({ partitions: 4 }).start(), { code: 'consumer_identity_conflict' });
        const plain = createConsumer({
          name: g.name,
          source: g.store,
          target: g.target,
          handle: () => undefined,
        });
        await assert.rejects(plain.start(), { code: 'consumer_identity_conflict' });
      }));

    it('an outage in a group: each partition pauses, probes and resumes by itself, parking nothing', () =>
      withGroup(async (g) => {
        const c = randomCategory('acct');
        // Two entities or more in every partition: each partition's failures make an outage there.
        const byPartition = new Map<number, string[]>();
        for (let i = 0; [...byPartition.values()].filter((l) => l.length >= 2).length < PARTITIONS; i++) {
          const s = `${c}-${i}`;
          const p = streamPartition(s, PARTITIONS);
          byPartition.set(p, [...(byPartition.get(p) ?? []), s]);
        }
        const streams = [...byPartition.values()].flat();
        const expected = await g.append(streams, 2);
        let down = true;
        const m = g.member({
          onError: {
            attempts: 1,
            then: 'dead-letter',
            outage: { entities: 2, window: '1h', hold: '1h', probeDelay: 20, maxProbeDelay: 100 },
          },
          handle: () => {
            if (down) throw new Error('ledger service unreachable');
          },
        });
        await m.start();
        await until(
          () => {
            const parts = m.status().partitions ?? [];
            return parts.length === PARTITIONS && parts.every((p) => p.status === 'paused');
          },
          { message: 'every partition paused by the outage', timeoutMs: 20_000 },
        );
        assert.deepEqual(await g.store.deadLetters.list(g.name, { all: true }), [], 'nothing parked');
        down = false;
        await m.whenCaughtUp({ timeoutMs: 20_000 });
        const totals = await g.totals();
        assert.deepEqual(new Map([...totals].map(([s, t]) => [s, t.total])), expected);
        assertInOrderOnce(g.handled, 2);
        assert.deepEqual(await g.store.deadLetters.list(g.name, { all: true }), [], 'nothing ever parked');
        assert.ok((m.status().partitions ?? []).every((p) => p.status !== 'paused'));
      }));

    it('consumers.reset moves every partition; dead letters are per entity and retried by stream', () =>
      withGroup(async (g) => {
        const c = randomCategory('acct');
        const streams = Array.from({ length: 12 }, (_, i) => `${c}-${i}`);
        await g.append(streams, 2);
        const m = g.member();
        await m.start();
        await m.whenCaughtUp({ timeoutMs: 20_000 });
        await m.stop();
        await assert.rejects(g.store.consumers.reset(g.name, 10_000_000), { code: 'invalid_input' });
        await g.store.consumers.reset(g.name, 0);
        const info = await g.store.consumers.get(g.name);
        assert.ok(info.partitions!.every((p) => p.position === 0));
        assert.equal(info.position, 0);
        assert.ok(info.lag > 0);
        // Nothing parked: listing a group gathers its partitions' dead letters.
        assert.deepEqual(await g.store.deadLetters.list(g.name), []);
        assert.equal(await g.store.deadLetters.retry(g.name, { stream: streams[0]! }), 0);
        assert.ok(streamPartition(streams[0]!, PARTITIONS) < PARTITIONS);
      }));
  });
}

// The inner loop (`npm run test:fast`) leaves out the memory store: its groups run in groupModel.test.ts.
if (!fastTests) {
  describeConsumerGroups(
    'memory store, sqlite target',
    () => {
      const store = createMemoryStore();
      return Promise.resolve({ store, cleanup: () => store.close() });
    },
    makeSqliteFixture,
  );
}

describeConsumerGroups(
  'sqlite store, sqlite target',
  async () => {
    const dir = tempDir();
    const store = await openSqliteStore({ path: dir.file('events.db') });
    return {
      store,
      cleanup: async () => {
        await store.close();
        await dir.cleanup();
      },
    };
  },
  makeSqliteFixture,
);

describe('postgres', { skip: pg.skip }, () => {
  describeConsumerGroups(
    'postgres store, postgres target',
    async () => {
      const store = await pg.openSharedStore();
      return { store, cleanup: () => store.close() };
    },
    pgTargets.make,
  );
});

describeConsumerGroups(
  'remote members through the server (SQLite store), sqlite target',
  async () => {
    const dir = tempDir();
    const served = await openSqliteStore({ path: dir.file('events.db') });
    const server = await startServer({ store: served, port: 0 });
    const store = connect(server.url);
    return {
      store,
      cleanup: async () => {
        await store.close();
        await server.close();
        await served.close();
        await dir.cleanup();
      },
    };
  },
  makeSqliteFixture,
);

describe('consumer groups seen through the server', () => {
  it('GET /v1/consumers/:name and /metrics show each partition: index, position, owner, epoch, lag', async () => {
    const dir = tempDir();
    const served = await openSqliteStore({ path: dir.file('events.db') });
    const server = await startServer({ store: served, port: 0 });
    const fx = await makeSqliteFixture();
    const name = randomConsumer('g');
    const remote = connect(server.url);
    const member = createConsumer({
      name,
      source: remote,
      target: fx.target,
      partitions: 4,
      leaseTtlMs: LEASE_TTL_MS,
      handle: () => undefined,
    });
    try {
      for (let i = 0; i < 20; i++) await served.append(`acct-${i}`, [{ type: 'opened', data: {} }]);
      await member.start();
      await member.whenCaughtUp({ timeoutMs: 20_000 });
      const res = await fetch(`${server.url}/v1/consumers/${name}`);
      const info = (await res.json()) as ConsumerInfo;
      assert.deepEqual(
        info.partitions?.map((p) => [p.index, p.lag, p.epoch, p.owner === member.status().member]),
        [0, 1, 2, 3].map((i) => [i, 0, 1, true]),
      );
      assert.equal(info.partitions.reduce((n, p) => n + (p.position > 0 ? 1 : 0), 0) > 0, true);
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      for (let i = 0; i < 4; i++) {
        assert.match(
          metrics,
          new RegExp(`idem_consumer_partition_lag_events\\{consumer="${name}",partition="${i}"\\} 0`),
        );
        assert.match(
          metrics,
          new RegExp(`idem_consumer_partition_epoch\\{consumer="${name}",partition="${i}"\\} 1`),
        );
      }
    } finally {
      await member.stop();
      await remote.close();
      await server.close();
      await served.close();
      await fx.cleanup();
      await dir.cleanup();
    }
  });
});
