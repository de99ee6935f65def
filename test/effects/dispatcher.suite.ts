// The effect dispatcher against one target kind: races, retries, leases, a killed process.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { createConsumer } from '../../src/consumer/index.js';
import { createEffectDispatcher } from '../../src/effects/dispatcher.js';
import { effectCounts, listEffects, retryEffects } from '../../src/effects/admin.js';
import { until } from '../support/until.js';
import type { MakeFixture } from './support/fixture.js';
import { appendInvoices, killChild, spawnDispatcher } from './support/helpers.js';
import { mailHandler, startMailServer } from './support/mailServer.js';

export function describeDispatcher(label: string, make: MakeFixture, skip: string | false = false): void {
  describe(`effect dispatcher (${label})`, { skip }, () => {
    it('two dispatchers (two processes) racing on 1,000 effects call each handler exactly once', async () => {
      const fx = await make();
      const mail = await startMailServer();
      const consumer = createConsumer({
        name: 'bulk_v1',
        source: fx.store,
        target: fx.target,
        effects: { liveFrom: 'start' },
        batch: { size: 500 },
        handle: async (e, ctx) => {
          await ctx.effect('send-receipt', { n: (e.data as { n: number }).n });
        },
      });
      const a = createEffectDispatcher({
        target: fx.target,
        handlers: { 'send-receipt': mailHandler(mail.url, '/send', 'a') },
        owner: 'a',
        pollIntervalMs: 5,
        batchSize: 25,
      });
      let b: ReturnType<typeof spawnDispatcher> | null = null;
      try {
        for (let i = 0; i < 10; i++) {
          await fx.store.append(
            `bulk-${i}`,
            Array.from({ length: 100 }, (_, j) => ({ type: 'invoice.issued', data: { n: i * 100 + j } })),
          );
        }
        await consumer.start();
        await consumer.whenCaughtUp({ timeoutMs: 20_000 });
        assert.equal((await effectCounts(fx.target)).pending, 1000);
        b = spawnDispatcher({
          target: fx.childTarget,
          mailUrl: mail.url,
          leaseMs: 30_000,
          hang: false,
          label: 'b',
        });
        await until(() => mail.calls.some((c) => c.from === 'b'), {
          timeoutMs: 20_000,
          message: 'the child dispatcher to start',
        });
        await a.start();
        await until(async () => (await effectCounts(fx.target)).done === 1000, {
          timeoutMs: 40_000,
          message: '1,000 effects done',
        });
        await a.stop();
        await killChild(b);
        const perKey = new Map<string, number>();
        for (const c of mail.calls) perKey.set(c.key, (perKey.get(c.key) ?? 0) + 1);
        assert.equal(perKey.size, 1000);
        assert.ok(
          [...perKey.values()].every((n) => n === 1),
          'no key called twice',
        );
        assert.equal(mail.calls.length, 1000);
        const byA = mail.calls.filter((c) => c.from === 'a').length;
        assert.equal(a.metrics().done, byA);
        assert.equal(a.metrics().lostLeases, 0);
        assert.ok(byA > 0 && byA < 1000, `both dispatchers worked (a ${byA}, b ${1000 - byA})`);
      } finally {
        await a.stop();
        if (b) await killChild(b);
        await consumer.stop();
        await mail.close();
        await fx.cleanup();
      }
    });

    it('a failing effect is retried with backoff, then failed and visible; retry makes it pending again', async () => {
      const fx = await make();
      const mail = await startMailServer();
      const consumer = createConsumer({
        name: 'flaky_v1',
        source: fx.store,
        target: fx.target,
        effects: { liveFrom: 'start' },
        handle: async (e, ctx) => {
          await ctx.effect('send-receipt', { n: (e.data as { n: number }).n });
        },
      });
      const failures: { attempt: number; final: boolean }[] = [];
      const registry = new Registry();
      const d = createEffectDispatcher({
        target: fx.target,
        handlers: { 'send-receipt': mailHandler(mail.url) },
        retry: { attempts: 3, backoff: 'fixed', initialDelayMs: 20 },
        pollIntervalMs: 5,
        metrics: { registry },
        onFailure: (_err, info) => failures.push({ attempt: info.attempt, final: info.final }),
      });
      try {
        await appendInvoices(fx.store, 1, 1);
        await consumer.start();
        await consumer.whenCaughtUp({ timeoutMs: 10_000 });
        mail.failNext(3);
        await d.start();
        await until(async () => (await effectCounts(fx.target)).failed === 1, {
          message: 'the effect failed',
        });
        const [row] = await listEffects(fx.target, { status: 'failed' });
        assert.ok(row);
        assert.equal(row.attempts, 3);
        assert.match(row.lastError ?? '', /503/);
        assert.deepEqual(failures, [
          { attempt: 1, final: false },
          { attempt: 2, final: false },
          { attempt: 3, final: true },
        ]);
        assert.deepEqual(
          { retried: d.metrics().retried, failed: d.metrics().failed },
          { retried: 2, failed: 1 },
        );
        assert.equal(mail.sent.size, 0);
        assert.equal(await retryEffects(fx.target, row.idempotencyKey), 1);
        await until(async () => (await effectCounts(fx.target)).done === 1, {
          message: 'the retried effect done',
        });
        const [done] = await listEffects(fx.target, { status: 'done' });
        assert.equal(done?.attempts, 1);
        assert.equal(mail.sent.size, 1);
        assert.ok(
          mail.calls.every((c) => c.key === row.idempotencyKey),
          'every attempt used the same key',
        );
        const text = await registry.metrics();
        assert.match(text, /idem_effects\{status="done"\} 1/);
        assert.match(text, /idem_effects\{status="failed"\} 0/);
        assert.match(text, /idem_effect_calls_total\{outcome="retry"\} 2/);
        assert.match(text, /idem_effect_calls_total\{outcome="failed"\} 1/);
      } finally {
        await d.stop();
        await consumer.stop();
        await mail.close();
        await fx.cleanup();
      }
    });

    it('a call longer than the lease keeps it renewed: no other dispatcher takes the effect over', async () => {
      const fx = await make();
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let calls = 0;
      const consumer = createConsumer({
        name: 'slow_v1',
        source: fx.store,
        target: fx.target,
        effects: { liveFrom: 'start' },
        handle: async (_e, ctx) => {
          await ctx.effect('slow', {});
        },
      });
      // A lease long enough for a loaded machine's pauses (a renewal every 400 ms, 1.2 s to land).
      const leaseMs = 1_200;
      const a = createEffectDispatcher({
        target: fx.target,
        handlers: {
          slow: async () => {
            calls++;
            await gate;
            return 'ok';
          },
        },
        owner: 'a',
        leaseMs,
        pollIntervalMs: 10,
      });
      // b's call returns at once: were b to take the effect over, its `runOnce` would answer 1.
      let callsByB = 0;
      const b = createEffectDispatcher({
        target: fx.target,
        handlers: { slow: () => Promise.resolve(`b ${++callsByB}`) },
        owner: 'b',
        leaseMs,
      });
      try {
        await appendInvoices(fx.store, 1, 1);
        await consumer.start();
        await consumer.whenCaughtUp({ timeoutMs: 10_000 });
        await a.start();
        const first = await until(
          async () => (await listEffects(fx.target)).find((r) => r.leaseOwner === 'a'),
          {
            message: 'a to claim the effect',
          },
        );
        const claimedUntil = Date.parse(first.leaseUntil!);
        await until(
          async () => {
            const [row] = await listEffects(fx.target);
            return row && Date.parse(row.leaseUntil ?? '0') > claimedUntil + leaseMs;
          },
          { message: 'the lease renewed a lease period past its first term' },
        );
        assert.equal(await b.runOnce(), 0, 'b finds nothing to claim');
        release();
        await until(async () => (await effectCounts(fx.target)).done === 1, {
          message: 'the slow effect done',
        });
        assert.equal(calls, 1);
        assert.equal(callsByB, 0);
        const [row] = await listEffects(fx.target);
        assert.equal(row?.attempts, 1);
        assert.equal(row?.result, 'ok');
      } finally {
        release();
        await a.stop();
        await consumer.stop();
        await fx.cleanup();
      }
    });

    it('a dispatcher killed mid-call (SIGKILL) is taken over after its lease and the call repeats with the same key', async () => {
      const fx = await make();
      const mail = await startMailServer();
      const consumer = createConsumer({
        name: 'killed_v1',
        source: fx.store,
        target: fx.target,
        effects: { liveFrom: 'start' },
        handle: async (_e, ctx) => {
          await ctx.effect('send-receipt', { to: 'x@example.com' });
        },
      });
      const killed = spawnDispatcher({
        target: fx.childTarget,
        mailUrl: mail.url,
        leaseMs: 300,
        hang: true,
        label: 'killed',
      });
      const d = createEffectDispatcher({
        target: fx.target,
        handlers: { 'send-receipt': mailHandler(mail.url) },
        pollIntervalMs: 10,
      });
      try {
        await appendInvoices(fx.store, 1, 1);
        await consumer.start();
        await consumer.whenCaughtUp({ timeoutMs: 10_000 });
        await until(() => mail.calls.length === 1, {
          timeoutMs: 20_000,
          message: 'the child to call the mail server',
        });
        killed.child.kill('SIGKILL');
        assert.equal(await killed.exited, 'SIGKILL');
        const [held] = await listEffects(fx.target);
        assert.equal(held?.status, 'pending');
        assert.equal(held?.attempts, 1);
        assert.ok(held?.leaseOwner, 'the dead dispatcher still holds the lease');
        await d.start();
        await until(async () => (await effectCounts(fx.target)).done === 1, {
          message: 'the effect done by the survivor',
        });
        const [row] = await listEffects(fx.target);
        assert.equal(row?.attempts, 2);
        assert.equal(mail.calls.length, 2);
        assert.equal(mail.calls[0]!.key, mail.calls[1]!.key, 'the same idempotency key both times');
        assert.equal(mail.calls[0]!.key, row?.idempotencyKey);
        assert.equal(mail.sent.size, 1);
      } finally {
        await killChild(killed);
        await d.stop();
        await consumer.stop();
        await mail.close();
        await fx.cleanup();
      }
    });
  });
}
