// A retry that lands while a park is between reading the stream's dead letters and writing the rows
// behind them: the two are serialised on the consumer's row, so the new rows are retried too instead
// of staying parked behind a letter that is no longer parked (the stream would stay blocked).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import type { RecordedEvent } from '../../src/core/event.js';
import { quoteSchema } from '../../src/postgres/schemaName.js';
import { PostgresSubscriptionState } from '../../src/postgres/subscriptionState.js';
import { until } from '../support/until.js';
import { pgTestContext } from './pgFixtures.js';

const ctx = await pgTestContext();

describe('postgres dead letters: park and retry at once', { skip: ctx.skip }, () => {
  it('a retry during a park behind the same stream waits for it and retries its rows too', async () => {
    const store = await ctx.openStore();
    const s = quoteSchema(store.schema);
    const pool = new pg.Pool({ connectionString: ctx.db.connectionString, max: 4 });
    const state = new PostgresSubscriptionState(pool, s);
    const blocker = new pg.Client({ connectionString: ctx.db.connectionString });
    await blocker.connect();
    try {
      const stream = 'invoice-1';
      await store.append(
        stream,
        [1, 2, 3].map((i) => ({ type: 'step', data: { i } })),
      );
      const events: RecordedEvent[] = [];
      for await (const e of store.readStream(stream)) events.push(e);
      assert.equal((await state.register('c', {}, 0)).ok, true);
      const lease = await state.acquire('c', 'owner-1', 60_000);
      assert.ok(lease.ok);
      const parked = await state.park('c', lease.epoch, {
        event: events[0]!,
        reason: 'broken',
        error: null,
        attempts: 1,
        redrive: null,
      });
      assert.ok(parked.ok);

      // An uncommitted row with the key of event 3 holds the park's INSERT after its reads.
      await blocker.query('BEGIN');
      await blocker.query(
        `INSERT INTO ${s}.dead_letters (consumer, event_id, stream, position, event, reason, attempts, status)
         VALUES ('c', $1, $2, $3, '{}', 'holding', 0, 'skipped')`,
        [events[2]!.id, stream, events[2]!.position],
      );
      const behind = state.parkBehind('c', lease.epoch, events.slice(1));
      // Asked on a pooled connection: a transaction (the blocker's) sees one snapshot of the activity view.
      const waitingOnLocks = async (): Promise<number> => {
        const { rows } = await pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        return rows[0]!.n;
      };
      await until(async () => (await waitingOnLocks()) === 1, { message: 'the park waits on the held key' });
      let retryDone = false;
      const retried = state.retry('c', { streams: [stream] }).finally(() => (retryDone = true));
      // Serialised, the retry waits for the park's transaction; otherwise it finishes at once.
      await until(async () => retryDone || (await waitingOnLocks()) === 2, {
        message: 'the retry waits for the park, or is done',
      });
      await blocker.query('ROLLBACK');

      assert.deepEqual(await behind, { ok: true, parked: [true, true] });
      assert.equal(await retried, 3, 'the retry marks the head and the two rows parked behind it');
      const letters = await state.deadLetters('c', {});
      assert.deepEqual(
        letters.map((l) => [l.event.version, l.status]),
        [
          [1, 'retrying'],
          [2, 'retrying'],
          [3, 'retrying'],
        ],
      );
    } finally {
      await blocker.end();
      await pool.end();
      await store.close();
    }
  });
});
