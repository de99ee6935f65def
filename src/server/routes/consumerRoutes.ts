/** Consumer and dead-letter administration: `/v1/consumers[/:name[/reset|/release|/dead-letters[/retry|/skip]]]`. */
import type { FastifyInstance } from 'fastify';
import type { DeadLetterSelector } from '../../core/subscription.js';
import { validateConsumerName } from '../../core/validation.js';
import { filterWithin, requireConsumerVisible, requireStream } from '../access.js';
import type { RouteContext } from '../context.js';
import {
  boolQuery,
  checkQueryKeys,
  memberBodySchema,
  parseWith,
  resetBodySchema,
  selectorBodySchema,
} from '../schemas.js';

/** A member heartbeat's TTL when the body gives none (the store's default lease TTL). */
const DEFAULT_MEMBER_TTL_MS = 10_000;
import type { Principal } from '../tokens.js';

type NameParams = { Params: { name: string } };

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
    return { consumer: info.name, deleted: true };
  });

  app.post<NameParams>('/v1/consumers/:name/reset', { config: { scope: 'admin' } }, async (req) => {
    const body = parseWith(resetBodySchema, req.body, '');
    const info = await visible(req.principal, req.params.name);
    await store.consumers.reset(info.name, body.position);
    return store.consumers.get(info.name);
  });

  app.post<NameParams>('/v1/consumers/:name/release', { config: { scope: 'admin' } }, async (req) => {
    const info = await visible(req.principal, req.params.name);
    await store.consumers.release(info.name);
    return store.consumers.get(info.name);
  });

  // Consumer groups: a remote member's heartbeat (the members alive, sorted) and its leaving.
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
        let selector: DeadLetterSelector;
        if ('stream' in body) {
          requireStream(req.principal, body.stream);
          selector = { stream: body.stream };
        } else {
          selector = { id: body.id };
        }
        const p = req.principal;
        if (action === 'retry')
          return { consumer: info.name, action, count: await store.deadLetters.retry(info.name, selector) };
        const by = p.anonymous
          ? (body.by ?? 'http')
          : body.by
            ? `${body.by} (token ${p.name})`
            : `token ${p.name}`;
        return {
          consumer: info.name,
          action,
          count: await store.deadLetters.skip(info.name, selector, { by }),
        };
      },
    );
  }
}
