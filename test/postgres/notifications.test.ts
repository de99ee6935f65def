import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import type { Subscription } from '../../src/core/subscription.js';
import { until } from '../support/until.js';
import { pgTestContext } from './pgFixtures.js';

const ctx = await pgTestContext();

describe('postgres live wake-ups (LISTEN/NOTIFY)', { skip: ctx.skip }, () => {
  it("another process's append reaches onAppend through NOTIFY, and again after the LISTEN connection is killed", async () => {
    const a = await ctx.openStore();
    const b = await ctx.openStore({ schema: a.schema, pollIntervalMs: 50 });
    const heads: number[] = [];
    const off = a.onAppend((h) => heads.push(h));
    const admin = new pg.Client({ connectionString: ctx.db.connectionString });
    await admin.connect();
    try {
      await until(() => a.listening, { message: 'the LISTEN connection' });
      const r0 = await b.append('note-0', [{ type: 't', data: 0 }]);
      await until(() => heads.includes(r0.lastPosition), { message: 'the notification of the first append' });
      // Measured on a warm connection: from the append's acknowledgement to the other store hearing it.
      const r1 = await b.append('note-1', [
        { type: 't', data: 1 },
        { type: 't', data: 2 },
      ]);
      const acked = process.hrtime.bigint();
      await until(() => heads.includes(r1.lastPosition), {
        intervalMs: 1,
        message: 'the notification of the second append',
      });
      console.log(
        `# notification heard ${(Number(process.hrtime.bigint() - acked) / 1e6).toFixed(1)} ms after the append was acknowledged`,
      );

      // Cut every LISTEN connection of the database: the store reconnects (polling meanwhile).
      const killed = await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'`,
      );
      assert.ok((killed.rowCount ?? 0) >= 1, 'a LISTEN backend was terminated');
      const r2 = await b.append('note-2', [{ type: 't', data: 3 }]);
      await until(() => heads.includes(r2.lastPosition), {
        message: 'the append made while LISTEN was down',
      });
      await until(() => a.listening, { message: 'the LISTEN connection to come back' });
      const r3 = await b.append('note-3', [{ type: 't', data: 4 }]);
      await until(() => heads.includes(r3.lastPosition), { message: 'the append after reconnecting' });
      assert.deepEqual(
        heads,
        [...heads].sort((x, y) => x - y),
        'heads are reported in increasing order',
      );
      assert.equal(new Set(heads).size, heads.length, 'each head is reported once');
    } finally {
      off();
      await admin.end();
      await b.close();
      await a.close();
    }
  });

  it('a store that only appends opens no LISTEN connection; its first subscription does', async () => {
    const a = await ctx.openStore();
    const admin = new pg.Client({ connectionString: ctx.db.connectionString });
    await admin.connect();
    const listeners = async (): Promise<number> =>
      (
        await admin.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'`,
        )
      ).rows[0]!.n;
    try {
      await a.append('quiet-1', [{ type: 't', data: 1 }]);
      await a.append('quiet-2', [{ type: 't', data: 2 }]);
      assert.equal(a.listening, false);
      assert.equal(await listeners(), 0);
      const sub = await a.subscribe('quiet_v1', { from: 'end' });
      try {
        await until(() => a.listening, { message: 'the LISTEN connection of the first subscription' });
        assert.equal(await listeners(), 1);
      } finally {
        await sub.close();
      }
    } finally {
      await admin.end();
      await a.close();
    }
  });

  it('stops listening while every subscription rests, and listens again when one waits for appends', async () => {
    const a = await ctx.openStore();
    const b = await ctx.openStore({ schema: a.schema });
    const idle = await a.subscribe('resting_v1', { filter: { streamPrefixes: ['nobody-'] }, from: 'end' });
    const idleLoop = (async () => {
      for await (const m of idle)
        if (m.kind === 'events') throw new Error('the idle subscription got events');
    })();
    let appending = true;
    let appended = 0;
    // Another process appends all the time: at every polling tick the idle subscription finds only
    // events its filter leaves out and rests until the next, so nothing waits for appends.
    const appender = (async () => {
      while (appending) {
        await b.append(`busy-${appended++}`, [{ type: 't', data: null }]);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    let live: Subscription | undefined;
    try {
      await until(() => a.listening, { message: 'the LISTEN connection' });
      await until(() => !a.listening, { message: 'UNLISTEN while every subscription rests' });
      const unlistenedAt = appended;
      await until(() => appended >= unlistenedAt + 20, { message: '20 more appends' });
      assert.equal(a.listening, false, 'still not listening while the appends go on');
      appending = false;
      await appender;

      // A subscription at the head of a quiet log waits for appends: LISTEN again.
      live = await a.subscribe('live_again_v1', { filter: { streamPrefixes: ['busy-'] }, from: 'end' });
      const it = live[Symbol.asyncIterator]();
      const first = await it.next();
      assert.ok(!first.done && first.value.kind === 'caught_up');
      await until(() => a.listening, { message: 'LISTEN again for the waiting subscription' });
      const r = await b.append('busy-last', [{ type: 't', data: null }]);
      const next = await it.next();
      assert.ok(!next.done && next.value.kind === 'events');
      assert.deepEqual(
        next.value.events.map((e) => e.position),
        [r.lastPosition],
      );
    } finally {
      appending = false;
      await appender;
      await live?.close();
      await idle.close();
      await idleLoop;
      await b.close();
      await a.close();
    }
  });

  it('a live subscriber in one process receives an append made by another', async () => {
    const a = await ctx.openStore();
    const b = await ctx.openStore({ schema: a.schema });
    const sub = await a.subscribe('live_v1', { from: 'end' });
    try {
      const it = sub[Symbol.asyncIterator]();
      const first = await it.next();
      assert.ok(!first.done && first.value.kind === 'caught_up');
      const r = await b.append('live-1', [{ type: 'hello', data: null }]);
      const next = await it.next();
      assert.ok(!next.done && next.value.kind === 'events');
      assert.deepEqual(
        next.value.events.map((e) => e.id),
        r.ids,
      );
    } finally {
      await sub.close();
      await b.close();
      await a.close();
    }
  });
});
