/**
 * What the dashboard reads besides the store routes: the caller's token (`/v1/session`), the lag
 * history, a consumer's reported monitors, and the effect outbox (`/v1/effects`).
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { EFFECT_STATUSES, type EffectStatus } from '../../core/effectTypes.js';
import { IdemError, InvalidInputError, NotFoundError } from '../../core/errors.js';
import { validateConsumerName } from '../../core/validation.js';
import { effectCounts, listEffects, retryEffects } from '../../effects/admin.js';
import { filterWithin, requireConsumerVisible } from '../access.js';
import type { RouteContext } from '../context.js';
import { checkQueryKeys, intQuery, parseWith } from '../schemas.js';
import { SCOPES } from '../tokens.js';

type NameParams = { Params: { name: string } };

const effectRetrySchema = z.union(
  [z.strictObject({ id: z.string().min(3).max(1000) }), z.strictObject({ allFailed: z.literal(true) })],
  { error: 'must be { "id": "<scope>/<key>" } or { "allFailed": true }' },
);

export function registerConsoleRoutes(app: FastifyInstance, ctx: RouteContext): void {
  const { store } = ctx;

  // Any valid token may ask what it is allowed; the dashboard disables what it may not do.
  app.get('/v1/session', { config: { authenticate: true } }, async (req) => {
    checkQueryKeys(req.query as Record<string, unknown>, []);
    const p = req.principal;
    return {
      name: p.name,
      scopes: SCOPES.filter((s) => p.scopes.has(s)),
      streamPrefixes: p.streamPrefixes,
      tokens: ctx.tokens.enabled,
    };
  });

  app.get('/v1/lag-history', { config: { scope: 'read' } }, async (req) => {
    const query = req.query as Record<string, unknown>;
    checkQueryKeys(query, ['consumer']);
    const consumer =
      query.consumer === undefined ? undefined : validateConsumerName(query.consumer, 'consumer');
    const series = ctx.lagHistory
      .list(consumer)
      .filter((s) => filterWithin(req.principal, s.filter))
      .map((s) => ({ name: s.name, samples: s.samples }));
    return { intervalMs: ctx.lagHistory.intervalMs, consumers: series };
  });

  app.get<NameParams>('/v1/consumers/:name/monitors', { config: { scope: 'read' } }, async (req) => {
    const name = validateConsumerName(req.params.name, 'name');
    requireConsumerVisible(req.principal, await store.consumers.get(name));
    const report = ctx.metrics.reports.get(name);
    return {
      consumer: name,
      reportedAt: report?.reportedAt ?? null,
      repeatRate: report?.repeatRate ?? null,
      monitors: report?.monitors ?? null,
    };
  });

  /** The outbox belongs to every consumer of the target: restricted tokens do not see it. */
  function outbox(prefixes: readonly string[] | null) {
    if (!ctx.effectsTarget || prefixes !== null) {
      throw new IdemError(
        'not_found',
        'this server shows no effect outbox' +
          (ctx.effectsTarget
            ? ' to a token limited to some streams'
            : ' (idem serve --target-db or --target-postgres)'),
        { what: 'effects target' },
      );
    }
    return ctx.effectsTarget;
  }

  app.get('/v1/effects', { config: { scope: 'read' } }, async (req) => {
    const query = req.query as Record<string, unknown>;
    checkQueryKeys(query, ['status', 'scope', 'limit']);
    const target = outbox(req.principal.streamPrefixes);
    const status = query.status;
    if (status !== undefined && !EFFECT_STATUSES.includes(status as EffectStatus))
      throw new InvalidInputError('status', `must be one of ${EFFECT_STATUSES.join(', ')}`);
    const scope = query.scope;
    if (scope !== undefined && (typeof scope !== 'string' || scope.length === 0 || scope.length > 200))
      throw new InvalidInputError('scope', 'must be a string of 1-200 characters');
    const limit = intQuery(query, 'limit', 1, ctx.limits.maxReadLimit) ?? 100;
    const effects = await listEffects(target, {
      limit,
      ...(status === undefined ? {} : { status: status as EffectStatus }),
      ...(scope === undefined ? {} : { scope }),
    });
    return { counts: await effectCounts(target), effects };
  });

  app.post('/v1/effects/retry', { config: { scope: 'admin' } }, async (req) => {
    const body = parseWith(effectRetrySchema, req.body, '');
    const target = outbox(req.principal.streamPrefixes);
    const count = await retryEffects(target, 'id' in body ? body.id : { allFailed: true });
    if (count === 0 && 'id' in body) throw new NotFoundError('failed or suppressed effect', body.id);
    return { retried: count };
  });
}
