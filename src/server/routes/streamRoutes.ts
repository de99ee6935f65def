/** Append and read routes: `POST|GET /v1/streams/:stream/events`, `POST /v1/appends` and `GET /v1/events`. */
import { MAX_PARTITIONS } from '../../core/streamHash.js';
import { MAX_SHREDS_LIMIT } from '../../core/limits.js';
import type { FastifyInstance } from 'fastify';
import type { RecordedEvent } from '../../core/event.js';
import type { ReadStreamOptions } from '../../core/eventStore.js';
import type { EventFilter } from '../../core/filter.js';
import { normalizeFilter } from '../../core/filter.js';
import { parseHistoryTime } from '../../core/history.js';
import { validateStreamName } from '../../core/validation.js';
import { validateSubject } from '../../core/encryption.js';
import { IdemError, InvalidInputError } from '../../core/errors.js';
import { filterWithin, requireFilterWithin, requireStream } from '../access.js';
import { appendChecked, appendEach } from '../appendBatch.js';
import type { RouteContext } from '../context.js';
import {
  appendBodySchema,
  appendsBodySchema,
  checkQueryKeys,
  intQuery,
  listQuery,
  parseWith,
} from '../schemas.js';

type StreamParams = { Params: { stream: string } };

export function registerStreamRoutes(app: FastifyInstance, ctx: RouteContext): void {
  const { store, limits } = ctx;

  app.post<StreamParams>(
    '/v1/streams/:stream/events',
    { config: { scope: 'append' } },
    async (req, reply) => {
      const stream = validateStreamName(req.params.stream);
      requireStream(req.principal, stream);
      const body = parseWith(appendBodySchema, req.body, '');
      const result = await appendChecked(ctx, stream, body);
      return reply.code(result.duplicate ? 200 : 201).send(result);
    },
  );

  // Several independent appends in one request: each is checked and decided on its own, exactly as
  // the route above would, and gets its own result or error. They are all handed to the store in the
  // same turn of the event loop, so they share its group commit.
  app.post('/v1/appends', { config: { scope: 'append' } }, async (req) => {
    const { appends } = parseWith(appendsBodySchema, req.body, '');
    return {
      results: await appendEach(ctx, req.principal, appends, (err) =>
        req.log.error({ err }, 'append failed'),
      ),
    };
  });

  app.get<StreamParams>('/v1/streams/:stream/events', { config: { scope: 'read' } }, async (req) => {
    const stream = validateStreamName(req.params.stream);
    requireStream(req.principal, stream);
    const query = req.query as Record<string, unknown>;
    checkQueryKeys(query, ['fromVersion', 'limit', 'toPosition', 'toTime']);
    const fromVersion = intQuery(query, 'fromVersion', 0) ?? 1;
    const limit = Math.min(intQuery(query, 'limit', 1) ?? limits.defaultReadLimit, limits.maxReadLimit);
    const options: ReadStreamOptions = { fromVersion, limit };
    const toPosition = intQuery(query, 'toPosition', 0);
    if (toPosition !== undefined) options.toPosition = toPosition;
    if (query.toTime !== undefined) options.toTime = parseHistoryTime(query.toTime);
    const events: RecordedEvent[] = [];
    for await (const e of store.readStream(stream, options)) events.push(e);
    const version = await store.streamVersion(stream);
    const last = events[events.length - 1];
    return { stream, version, events, next: events.length === limit && last ? last.version + 1 : null };
  });

  app.get('/v1/events', { config: { scope: 'read' } }, async (req) => {
    const query = req.query as Record<string, unknown>;
    checkQueryKeys(query, [
      'after',
      'limit',
      'types',
      'categories',
      'streamPrefixes',
      'partitionCount',
      'partitionIndex',
    ]);
    const after = intQuery(query, 'after', 0) ?? 0;
    const limit = Math.min(intQuery(query, 'limit', 1) ?? limits.defaultReadLimit, limits.maxReadLimit);
    const raw: EventFilter = {};
    for (const key of ['types', 'categories', 'streamPrefixes'] as const) {
      const list = listQuery(query, key);
      if (list) raw[key] = list;
    }
    const partitionCount = intQuery(query, 'partitionCount', 1, MAX_PARTITIONS);
    const partitionIndex = intQuery(query, 'partitionIndex', 0, MAX_PARTITIONS - 1);
    if (partitionCount !== undefined || partitionIndex !== undefined) {
      // normalizeFilter names the missing or out-of-range one.
      raw.partition = { count: partitionCount ?? NaN, index: partitionIndex ?? NaN };
    }
    let filter = normalizeFilter(raw);
    const p = req.principal;
    if (p.streamPrefixes !== null && !filterWithin(p, filter)) {
      // A restricted token reading without a stream constraint reads its own prefixes.
      if (!filter.categories && !filter.streamPrefixes)
        filter = { ...filter, streamPrefixes: [...p.streamPrefixes] };
      requireFilterWithin(p, filter, 'a read');
    }
    const events: RecordedEvent[] = [];
    for await (const e of store.readAll({ after, filter, limit })) events.push(e);
    const head = await store.headPosition();
    const last = events[events.length - 1];
    return { head, events, next: events.length === limit && last ? last.position : null };
  });

  // Crypto-shredding: deletes the subject's key in the store. Its events may lie in any stream, so a
  // token limited to some streams may not.
  app.post<{ Params: { subject: string } }>(
    '/v1/subjects/:subject/shred',
    { config: { scope: 'admin' } },
    async (req) => {
      const subject = validateSubject(req.params.subject, 'subject');
      if (req.principal.streamPrefixes !== null) {
        throw new IdemError(
          'forbidden',
          `token "${req.principal.name}" is limited to some streams; a subject's events may lie in any`,
        );
      }
      if (!store.shred) throw new InvalidInputError('subject', 'this store keeps no subject keys');
      return store.shred(subject);
    },
  );

  // The shred log, for consumers that forget shredded entities. Its rows name subjects and streams
  // anywhere in the store, so a token limited to some streams may not read it.
  app.get('/v1/shreds', { config: { scope: 'read' } }, async (req) => {
    const query = req.query as Record<string, unknown>;
    checkQueryKeys(query, ['after', 'limit']);
    const after = intQuery(query, 'after', 0) ?? 0;
    const limit = intQuery(query, 'limit', 1, MAX_SHREDS_LIMIT) ?? MAX_SHREDS_LIMIT;
    if (req.principal.streamPrefixes !== null) {
      throw new IdemError(
        'forbidden',
        `token "${req.principal.name}" is limited to some streams; the shred log names streams anywhere`,
      );
    }
    return { shreds: store.shreds ? await store.shreds(after, limit) : [] };
  });
}
