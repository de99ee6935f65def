// Bad input to the effect APIs is refused with invalid_input naming the field.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createConsumer } from '../../src/consumer/index.js';
import { createEffectDispatcher } from '../../src/effects/dispatcher.js';
import { listEffects, retryEffects } from '../../src/effects/admin.js';
import { parseVersionedName } from '../../src/core/versionedName.js';
import { rebuildConsumer } from '../../src/consumer/rebuild.js';
import { makeSqliteFixture } from './support/fixture.js';

describe('effects: input validation', () => {
  it('ctx.effect refuses a bad kind, key or payload, and the event is dead-lettered with the message', async () => {
    const fx = await makeSqliteFixture();
    const errors: string[] = [];
    const consumer = createConsumer({
      name: 'bad_v1',
      source: fx.store,
      target: fx.target,
      onError: { attempts: 1, then: 'dead-letter' },
      handle: async (e, ctx) => {
        const n = (e.data as { n: number }).n;
        try {
          if (n === 1) await ctx.effect('', {});
          if (n === 2) await ctx.effect('k', {}, { key: '' });
          if (n === 3) await ctx.effect('k', { big: 10n });
        } catch (err) {
          errors.push(`${(err as { code?: string }).code}:${(err as Error).message}`);
          throw err;
        }
      },
    });
    try {
      for (let n = 1; n <= 3; n++) await fx.store.append(`s-${n}`, [{ type: 't', data: { n } }]);
      await consumer.start();
      await consumer.whenCaughtUp({ timeoutMs: 10_000 });
      // (The runtime's fast path and its savepoint retry both see the first failure.)
      const seen = [...new Set(errors)];
      assert.equal(seen.length, 3);
      assert.match(seen[0]!, /^invalid_input:.*kind/);
      assert.match(seen[1]!, /^invalid_input:.*key/);
      assert.match(seen[2]!, /^invalid_input:.*payload/);
      assert.equal((await listEffects(fx.target)).length, 0);
      assert.equal((await fx.store.deadLetters.list('bad_v1')).length, 3);
    } finally {
      await consumer.stop();
      await fx.cleanup();
    }
  });

  it('dispatcher, rebuild and admin options are checked', async () => {
    const fx = await makeSqliteFixture();
    try {
      const t = fx.target;
      assert.throws(() => createEffectDispatcher({ target: t, handlers: { a: 'x' as never } }), {
        code: 'invalid_input',
        message: /handlers\.a/,
      });
      assert.throws(() => createEffectDispatcher({ target: t, handlers: {}, retry: { attempts: 0 } }), {
        message: /retry\.attempts/,
      });
      assert.throws(() => createEffectDispatcher({ target: t, handlers: {}, leaseMs: -1 }), {
        message: /leaseMs/,
      });
      assert.throws(() => createEffectDispatcher({ target: { kind: 'memory' } as never, handlers: {} }), {
        message: /target/,
      });
      const base = { source: fx.store, target: t, handle: () => undefined };
      assert.throws(() => rebuildConsumer({ ...base, from: 'billing_v2', as: 'billing_v2' }), {
        message: /as: must differ/,
      });
      assert.throws(() => rebuildConsumer({ ...base, from: 'billing_v2', as: 'orders_v3' }), {
        message: /same consumer/,
      });
      assert.throws(() => rebuildConsumer({ ...base, from: 'billing_v1', as: 'billing' }), {
        message: /version suffix/,
      });
      assert.throws(() => createConsumer({ ...base, name: 'c_v1', effects: { liveFrom: -1 } }), {
        message: /effects\.liveFrom/,
      });
      assert.throws(() => createConsumer({ ...base, name: 'c_v1', effects: { scope: 'a/b' } }), {
        message: /effects\.scope/,
      });
      await assert.rejects(listEffects(t, { status: 'nope' as never }), { message: /status/ });
      await assert.rejects(retryEffects(t, 'no-slash'), { code: 'invalid_input' });
      assert.deepEqual(parseVersionedName('billing_v12'), {
        base: 'billing',
        version: 12,
        tableSuffix: '_v12',
      });
      assert.deepEqual(parseVersionedName('billing'), { base: 'billing', version: null, tableSuffix: '' });
    } finally {
      await fx.cleanup();
    }
  });
});
