// Effects exactly once and replay without re-firing, against one target kind.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createConsumer, type HandlerContext } from '../../src/consumer/index.js';
import type { RecordedEvent } from '../../src/core/event.js';
import { createEffectDispatcher } from '../../src/effects/dispatcher.js';
import { effectCounts, listEffects, retryEffects } from '../../src/effects/admin.js';
import { rebuildConsumer, type RebuildProgress } from '../../src/consumer/rebuild.js';
import { activeVersion, promoteConsumer, resetLedger } from '../../src/effects/versions.js';
import type { EffectWrite } from '../../src/core/effectTypes.js';
import { until } from '../support/until.js';
import type { AnyTx, MakeFixture } from './support/fixture.js';
import { appendInvoices } from './support/helpers.js';
import { mailHandler, startMailServer } from './support/mailServer.js';

export function describeEffects(label: string, make: MakeFixture, skip: string | false = false): void {
  describe(`effects (${label})`, { skip }, () => {
    it('an email consumer replayed three times sends each email exactly once; reset-ledger re-runs handlers but writes no new effect', async () => {
      const fx = await make();
      const mail = await startMailServer();
      const writes: EffectWrite['status'][] = [];
      let handled = 0;
      const options = {
        name: 'mailer_v1',
        source: fx.store,
        target: fx.target,
        handle: async (e: RecordedEvent, ctx: HandlerContext<AnyTx>) => {
          handled++;
          const w = await ctx.effect('send-receipt', { to: (e.data as { email: string }).email });
          writes.push(w.status);
        },
        effects: { handlers: { 'send-receipt': mailHandler(mail.url) }, dispatcher: { pollIntervalMs: 10 } },
      };
      let consumer = createConsumer(options);
      try {
        await consumer.start();
        await appendInvoices(fx.store, 1, 5);
        await consumer.whenCaughtUp({ timeoutMs: 10_000 });
        await until(async () => (await effectCounts(fx.target)).done === 5, { message: '5 effects done' });
        assert.equal(mail.sent.size, 5);
        assert.equal(handled, 5);
        for (let replay = 1; replay <= 3; replay++) {
          await consumer.stop();
          await fx.store.consumers.reset('mailer_v1', 0);
          if (replay === 3) {
            const r = await resetLedger(fx.target, 'mailer_v1');
            assert.equal(r.ledgerRows, 5);
          }
          consumer = createConsumer(options);
          await consumer.start();
          await consumer.whenCaughtUp({ timeoutMs: 10_000 });
        }
        // Replays 1 and 2: the ledger skipped every event; replay 3 (ledger cleared): handlers ran, the outbox kept the keys.
        assert.equal(handled, 10);
        assert.deepEqual(writes, [...Array<string>(5).fill('pending'), ...Array<string>(5).fill('existing')]);
        await appendInvoices(fx.store, 6, 1);
        await consumer.whenCaughtUp({ timeoutMs: 10_000 });
        await until(async () => (await effectCounts(fx.target)).done === 6, {
          message: 'the new effect done',
        });
        assert.equal(mail.calls.length, 6, 'one call per email, none repeated');
        assert.equal(mail.sent.size, 6);
        const rows = await listEffects(fx.target, { status: 'done' });
        assert.equal(rows.length, 6);
        assert.ok(
          rows.every((r) => r.idempotencyKey === `mailer/${r.eventId}:send-receipt` && r.attempts === 1),
        );
        assert.deepEqual((rows[0]!.result as { duplicate: boolean }).duplicate, false);
      } finally {
        await consumer.stop();
        await mail.close();
        await fx.cleanup();
      }
    });

    it('an effect commits or rolls back with the handler: a retried handler writes one row, a dead-lettered one writes none', async () => {
      const fx = await make();
      const failedOnce = new Set<string>();
      const consumer = createConsumer({
        name: 'rollback_v1',
        source: fx.store,
        target: fx.target,
        effects: { liveFrom: 'start' },
        onError: { attempts: 2, backoff: 'none', then: 'dead-letter' },
        handle: async (e, ctx) => {
          await ctx.effect('notify', { n: (e.data as { n: number }).n });
          await ctx.effect('notify', { again: true }, { key: `custom-${e.id}` });
          if ((e.data as { n: number }).n === 3) throw new Error('always fails');
          if (!failedOnce.has(e.id)) {
            failedOnce.add(e.id);
            throw new Error('fails once');
          }
        },
      });
      try {
        await appendInvoices(fx.store, 1, 5);
        await consumer.start();
        await consumer.whenCaughtUp({ timeoutMs: 10_000 });
        const rows = await listEffects(fx.target, { scope: 'rollback' });
        const events = new Set(
          rows.map((r) => (r.payload as { n?: number }).n).filter((n) => n !== undefined),
        );
        assert.deepEqual([...events].sort(), [1, 2, 4, 5]);
        assert.equal(
          rows.length,
          8,
          'two effects for each of the four handled events, none for the dead letter',
        );
        assert.ok(rows.every((r) => r.status === 'pending'));
        assert.equal((await fx.store.deadLetters.list('rollback_v1')).length, 1);
      } finally {
        await consumer.stop();
        await fx.cleanup();
      }
    });

    it('rebuild: a new version fills fresh tables with progress, sends nothing for history, is promoted only once caught up', async () => {
      const fx = await make();
      const mail = await startMailServer();
      const handlers = { 'send-receipt': mailHandler(mail.url), archive: mailHandler(mail.url) };
      let gate: (() => void) | null = null;
      const opened = new Promise<void>((resolve) => (gate = resolve));
      const handle = async (e: RecordedEvent, ctx: HandlerContext<AnyTx>): Promise<void> => {
        if (ctx.version === 3 && e.position > 3) await opened;
        await fx.project(ctx.tx, `invoices${ctx.tableSuffix}`, e.stream, e.id);
        await ctx.effect('send-receipt', { id: e.id });
        if (ctx.version === 3) await ctx.effect('archive', { id: e.id });
      };
      // One dispatcher, stopped while v3 waits at its gate: on SQLite, v3's open transaction holds the
      // write lock there, and a claim in this same process would block the event loop on it.
      const dispatcher = createEffectDispatcher({ target: fx.target, handlers, pollIntervalMs: 10 });
      const v2 = createConsumer({ name: 'billing_v2', source: fx.store, target: fx.target, handle });
      const samples: RebuildProgress[] = [];
      const rebuild = rebuildConsumer({
        from: 'billing_v2',
        as: 'billing_v3',
        source: fx.store,
        // The same target object as v2: on SQLite its transactions take turns on one connection. (Two
        // connections to one file in one process would block the event loop on the write lock.)
        target: fx.target,
        handle,
        batch: { size: 1, catchUpSize: 1 }, // one event per transaction, so v3 stops at its gate after position 3
        progressIntervalMs: 10,
        onProgress: (p) => samples.push(p),
      });
      try {
        await v2.start();
        await appendInvoices(fx.store, 1, 10);
        await v2.whenCaughtUp({ timeoutMs: 10_000 });
        await dispatcher.start();
        await until(() => mail.sent.size === 10, { message: 'v2 sent 10 receipts' });
        await dispatcher.stop();
        await rebuild.start();
        await until(() => rebuild.consumer.status().position === 3, { message: 'v3 to wait at its gate' });
        // (v3's open transaction holds SQLite's write lock at the gate: touch only the store meanwhile.)
        await assert.rejects(
          rebuild.promote(),
          (err: Error & { code?: string }) => err.name === 'NotCaughtUpError' && err.code === 'unavailable',
        );
        gate!();
        await rebuild.whenCaughtUp({ timeoutMs: 20_000 });
        await dispatcher.start();
        assert.equal(await activeVersion(fx.target, 'billing'), null);
        const p = await rebuild.progress();
        assert.equal(p.caughtUp, true);
        assert.equal(p.position, 10);
        assert.equal(p.head, 10);
        assert.equal(p.etaSeconds, 0);
        assert.ok(samples.length > 0, 'progress was reported');
        assert.ok(
          samples.every((s) => s.name === 'billing_v3' && s.rebuildOf === 'billing_v2' && s.head === 10),
        );
        assert.equal(await fx.rowCount('invoices_v3'), 10);
        assert.equal(await fx.rowCount('invoices_v2'), 10, 'the old version kept its tables');
        const active = await rebuild.promote();
        assert.equal(active.consumer, 'billing_v3');
        assert.equal((await activeVersion(fx.target, 'billing'))?.consumer, 'billing_v3');
        const counts = await effectCounts(fx.target);
        assert.deepEqual(
          counts,
          { pending: 0, done: 10, failed: 0, suppressed: 10 },
          'receipts shared with v2, archives of history suppressed',
        );
        // Both versions serve new events: one receipt and one archive, each sent once.
        await appendInvoices(fx.store, 11, 1);
        await v2.whenCaughtUp({ timeoutMs: 10_000 });
        await rebuild.whenCaughtUp({ timeoutMs: 10_000 });
        await until(async () => (await effectCounts(fx.target)).done === 12, {
          message: 'the live effects done',
        });
        assert.equal(mail.calls.length, 12);
        assert.equal(mail.sent.size, 12);
      } finally {
        gate!();
        await dispatcher.stop();
        await rebuild.stop();
        await v2.stop();
        await mail.close();
        await fx.cleanup();
      }
    });

    it('replay policy: an opted-in kind is dispatched for history, others are suppressed', async () => {
      const fx = await make();
      const consumer = createConsumer({
        name: 'policy_v1',
        source: fx.store,
        target: fx.target,
        effects: { replay: { webhook: 'dispatch' } },
        handle: async (_e, ctx) => {
          await ctx.effect('webhook', {});
          await ctx.effect('email', {});
        },
      });
      try {
        await appendInvoices(fx.store, 1, 2);
        await consumer.start();
        await consumer.whenCaughtUp({ timeoutMs: 10_000 });
        const rows = await listEffects(fx.target);
        assert.deepEqual(rows.map((r) => `${r.kind}:${r.status}`).sort(), [
          'email:suppressed',
          'email:suppressed',
          'webhook:pending',
          'webhook:pending',
        ]);
        assert.equal(
          await retryEffects(fx.target, rows.find((r) => r.kind === 'email')!.idempotencyKey),
          1,
          'a suppressed effect can be sent by hand',
        );
        assert.equal((await effectCounts(fx.target)).pending, 3);
        assert.throws(
          () =>
            createConsumer({
              name: 'x_v1',
              source: fx.store,
              target: fx.target,
              handle: () => undefined,
              effects: { replay: { a: 'maybe' as 'dispatch' } },
            }),
          { code: 'invalid_input', message: /effects\.replay\.a/ },
        );
      } finally {
        await consumer.stop();
        await fx.cleanup();
      }
    });

    it('promote refuses a version that does not exist', async () => {
      const fx = await make();
      try {
        await assert.rejects(promoteConsumer({ source: fx.store, target: fx.target, name: 'nobody_v2' }), {
          code: 'not_found',
        });
      } finally {
        await fx.cleanup();
      }
    });
  });
}
