/** Consumer and dead-letter administration: `/v1/consumers[/:name[/reset|/release|/pause|/resume|/ledger-horizon|/dead-letters[/retry|/skip]]]`. */
import type { FastifyInstance } from 'fastify';
import { IdemError } from '../../core/errors.js';
import type { DeadLetterSelector } from '../../core/subscription.js';
import { validateConsumerName } from '../../core/validation.js';
import { filterWithin, requireConsumerVisible, requireStream } from '../access.js';
import type { RouteContext } from '../context.js';
import {
  boolQuery,
  checkQueryKeys,
  memberBodySchema,
  parseWith,
  pauseBodySchema,
  resetBodySchema,
  selectorBodySchema,
} from '../schemas.js';

/** A member heartbeat's TTL when the body gives none (the store's default lease TTL). */
const DEFAULT_MEMBER_TTL_MS = 10_000;
import type { Principal } from '../tokens.js';

type NameParams = { Params: { name: string } };

/**
 * Most entities one bulk retry or skip request acts on: a larger `limit` is served a request at a
 * time (the reply's `done` is false and `last` says where to go on), so no request runs for long.
 */
export const BULK_REQUEST_ENTITIES = 5_000;

export function registerConsumerRoutes(app: FastifyInstance, ctx: RouteContext): void {
  const { store } = ctx;

  /** The consumer's info, after checking that a prefix-restricted token may see it (`not_found` otherwise). */
  async function visible(p: Principal, rawName: string) {
    const name = validateConsumerName(rawName, 'name');
    const info = await store.consumers.get(name);
    requireConsumerVisible(p, info);
    return info;
  }

  app.get('/v1/consumers', { config: { scope: 'read' } }, async (req) => {
    checkQueryKeys(req.query as Record<string, unknown>, []);
    const all = await store.consumers.list();
    return { consumers: all.filter((c) => filterWithin(req.principal, c.filter)) };
  });

  app.get<NameParams>('/v1/consumers/:name', { config: { scope: 'read' } }, async (req) => {
    return visible(req.principal, req.params.name);
  });

  app.delete<NameParams>('/v1/consumers/:name', { config: { scope: 'admin' } }, async (req) => {
    const info = await visible(req.principal, req.params.name);
    await store.consumers.delete(info.name);
    ctx.metrics.reports.forget(info.name);
    return { consumer: info.name, deleted: true };
  });

  app.post<NameParams>('/v1/consumers/:name/reset', { config: { scope: 'admin' } }, async (req) => {
    const body = parseWith(resetBodySchema, req.body, '');
    const info = await visible(req.principal, req.params.name);
    await store.consumers.reset(info.name, body.position);
    return store.consumers.get(info.name);
  });

  // The consumer runtime reports the position through which its target pruned the dedup ledger;
  // resets below it are refused. A subscriber's scope: it is the runtime that calls it.
  app.put<NameParams>(
    '/v1/consumers/:name/ledger-horizon',
    { config: { scope: 'subscribe' } },
    async (req) => {
      const body = parseWith(resetBodySchema, req.body, '');
      const info = await visible(req.principal, req.params.name);
      if (!store.consumers.setLedgerHorizon)
        throw new IdemError('invalid_input', 'this store keeps no ledger horizons', { field: 'name' });
      await store.consumers.setLedgerHorizon(info.name, body.position);
      return { consumer: info.name, ledgerHorizon: body.position };
    },
  );

  app.post<NameParams>('/v1/consumers/:name/release', { config: { scope: 'admin' } }, async (req) => {
    const info = await visible(req.principal, req.params.name);
    await store.consumers.release(info.name);
    return store.consumers.get(info.name);
  });

  app.post<NameParams>('/v1/consumers/:name/pause', { config: { scope: 'admin' } }, async (req) => {
    const body = parseWith(pauseBodySchema, req.body ?? {}, '');
    const info = await visible(req.principal, req.params.name);
    await store.consumers.pause(info.name, { by: actor(req.principal, body.by) });
    return store.consumers.get(info.name);
  });

  app.post<NameParams>('/v1/consumers/:name/resume', { config: { scope: 'admin' } }, async (req) => {
    const info = await visible(req.principal, req.params.name);
    await store.consumers.resume(info.name);
    return store.consumers.get(info.name);
  });
  // Consumer groups: a remote member's heartbeat (the members alive, sorted, with their lease expiries) and its leaving.
  app.post<NameParams>('/v1/consumers/:name/members', { config: { scope: 'subscribe' } }, async (req) => {
    const body = parseWith(memberBodySchema, req.body, '');
    const name = validateConsumerName(req.params.name, 'name');
    const members = await store.consumers.heartbeatMember!(
      name,
      body.member,
      body.ttlMs ?? DEFAULT_MEMBER_TTL_MS,
    );
    return { consumer: name, members };
  });

  app.post<NameParams>(
    '/v1/consumers/:name/members/leave',
    { config: { scope: 'subscribe' } },
    async (req) => {
      const body = parseWith(memberBodySchema, req.body, '');
      const name = validateConsumerName(req.params.name, 'name');
      await store.consumers.leaveGroup!(name, body.member);
      return { consumer: name, member: body.member, left: true };
    },
  );

  app.get<NameParams>('/v1/consumers/:name/dead-letters', { config: { scope: 'read' } }, async (req) => {
    const query = req.query as Record<string, unknown>;
    checkQueryKeys(query, ['all']);
    const all = boolQuery(query, 'all') ?? false;
    const info = await visible(req.principal, req.params.name);
    return { consumer: info.name, deadLetters: await store.deadLetters.list(info.name, { all }) };
  });

  for (const action of ['retry', 'skip'] as const) {
    app.post<NameParams>(
      `/v1/consumers/:name/dead-letters/${action}`,
      { config: { scope: 'admin' } },
      async (req) => {
        const body = parseWith(selectorBodySchema, req.body, '');
        const info = await visible(req.principal, req.params.name);
        const by = actor(req.principal, body.by);
        if ('all' in body || 'error' in body) {
          // A restricted token sees only consumers whose streams are all its own: no stream check is due.
          const options = {
            limit: Math.min(body.limit ?? BULK_REQUEST_ENTITIES, BULK_REQUEST_ENTITIES),
            ...('error' in body ? { error: body.error } : {}),
            ...(body.after === undefined ? {} : { after: body.after }),
          };
          const r =
            action === 'retry'
              ? await store.deadLetters.retryMany(info.name, options)
              : await store.deadLetters.skipMany(info.name, { ...options, by });
          return { consumer: info.name, action, count: r.events, ...r };
        }
        let selector: DeadLetterSelector;
        if ('stream' in body) {
          requireStream(req.principal, body.stream);
          selector = { stream: body.stream };
        } else {
          selector = { id: body.id };
        }
        if (action === 'retry')
          return { consumer: info.name, action, count: await store.deadLetters.retry(info.name, selector) };
        return {
          consumer: info.name,
          action,
          count: await store.deadLetters.skip(info.name, selector, { by }),
        };
      },
    );
  }
}

/** Who acts, as recorded with a pause or a skip: the label given, and the token that gave it. */
function actor(p: Principal, by: string | undefined): string {
  if (p.anonymous) return by ?? 'http';
  return by ? `${by} (token ${p.name})` : `token ${p.name}`;
}
