/** The remote store: the `EventStore` port over the server's HTTP API and WebSocket subscriptions. */
import { ClosedError, IdemError, InvalidInputError } from '../core/errors.js';
import type { AppendResult, NewEvent, RecordedEvent } from '../core/event.js';
import {
  type AppendOptions,
  type EventStore,
  type ReadAllOptions,
  type ReadStreamOptions,
  type ShredRecord,
  type ShredResult,
} from '../core/eventStore.js';
import { validateShredsRange, validateSubject } from '../core/encryption.js';
import { checkKnownKeys } from '../core/knownKeys.js';
import { appendExpectation } from '../core/expectedVersion.js';
import type { EventFilter } from '../core/filter.js';
import { boundedPage } from '../core/history.js';
import type { MigrationStatus } from '../core/migrationStatus.js';
import { checkAllRead, checkStreamRead } from '../core/readOptions.js';
import { readPages, type Page } from '../core/readPages.js';
import {
  DEAD_LETTER_BULK_OPTION_KEYS,
  DEAD_LETTER_BULK_SKIP_OPTION_KEYS,
  DEAD_LETTER_LIST_OPTION_KEYS,
  DEAD_LETTER_SELECTOR_KEYS,
  DEAD_LETTER_SKIP_OPTION_KEYS,
  CONSUMER_PAUSE_OPTION_KEYS,
  type ConsumerAdmin,
  type ConsumerInfo,
  type DeadLetter,
  type DeadLetterAdmin,
  type DeadLetterBulkResult,
  type DeadLetterBulkSkipOptions,
  type DeadLetterSelector,
  type GroupMember,
  type SubscribeOptions,
  type Subscription,
} from '../core/subscription.js';
import {
  prepareAppend,
  validateConsumerName,
  validatePosition,
  validateStreamName,
} from '../core/validation.js';
import { compileUpcasters, type UpcastEvents, type Upcasters } from '../core/upcasters.js';
import { AppendCoalescer } from './appendCoalescer.js';
import { AppendSocketLink } from './appendSocketLink.js';
import { HttpApi, type HttpApiOptions } from './httpApi.js';
import { openRemoteSubscription, type RemoteSubscription } from './remoteSubscription.js';
import { eventCount, traceAppend } from '../core/tracing.js';

/** Sizes are the server's to judge; the client only checks shapes (and assigns ids, so retries stay idempotent). */
const NO_LIMITS = { maxEventBytes: Number.POSITIVE_INFINITY, maxAppendEvents: Number.POSITIVE_INFINITY };
/** Events fetched per read request (the server may clamp it lower, which paging absorbs). */
const PAGE = 1000;

export class RemoteEventStore implements EventStore {
  readonly url: string;
  private readonly http: HttpApi;
  /** Concurrent appends share requests (`POST /v1/appends`). */
  private readonly appends: AppendCoalescer;
  private readonly wsUrl: string;
  private readonly subscriptions = new Set<RemoteSubscription>();
  private closed = false;
  /** Set only when upcasters are given, so that a read without them does nothing more per event. */
  private readonly upcast: UpcastEvents | null;
  readonly consumers: ConsumerAdmin;
  readonly deadLetters: DeadLetterAdmin;

  /** `appendSocket`: send appends over the append WebSocket when the server offers it. */
  constructor(url: string, options: HttpApiOptions = {}, upcasters?: Upcasters, appendSocket = true) {
    const base = new URL(url);
    if (base.protocol !== 'http:' && base.protocol !== 'https:') {
      throw new TypeError(`idem server URL must be http: or https: (got ${base.protocol})`);
    }
    this.url = base.href.replace(/\/+$/, '');
    this.http = new HttpApi(this.url, options);
    const socket = appendSocket
      ? new AppendSocketLink(this.url, this.http.authHeaders, this.http.timeoutMs)
      : null;
    this.appends = new AppendCoalescer(this.http, socket);
    this.upcast = compileUpcasters(upcasters);
    this.wsUrl = `${this.url.replace(/^http/, 'ws')}/v1/subscribe`;
    this.consumers = this.consumerAdmin();
    this.deadLetters = this.deadLetterAdmin();
  }

  append(stream: string, events: NewEvent[], options: AppendOptions = {}): Promise<AppendResult> {
    return traceAppend(stream, eventCount(events), () => this.appendNow(stream, events, options));
  }

  // Not `async`: returning the coalescer's promise itself saves a promise and two ticks per append.
  private appendNow(stream: string, events: NewEvent[], options: AppendOptions): Promise<AppendResult> {
    try {
      this.assertOpen();
      const prepared = prepareAppend(stream, events, NO_LIMITS);
      const expectedVersion = appendExpectation(options);
      return this.appends.append(stream, prepared, expectedVersion);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  readStream(stream: string, options: ReadStreamOptions = {}): AsyncGenerator<RecordedEvent, undefined> {
    return readPages(() => {
      // The server applies the bound; it is checked here first so that bad input fails without a request.
      const { from, limit, bound } = checkStreamRead(stream, options);
      this.assertOpen();
      return {
        from,
        limit,
        pageSize: PAGE,
        fetchPage: async (version, size) => {
          this.assertOpen();
          const page = await this.http.request<Page>(
            'GET',
            `/v1/streams/${encodeURIComponent(stream)}/events`,
            {
              query: { fromVersion: version, limit: size, ...bound },
              retry: true,
            },
          );
          return this.upcastPage(boundedPage(page, bound));
        },
      };
    });
  }

  readAll(options: ReadAllOptions = {}): AsyncGenerator<RecordedEvent, undefined> {
    return readPages(() => {
      const { after, filter, limit } = checkAllRead(options);
      this.assertOpen();
      return {
        from: after,
        limit,
        pageSize: PAGE,
        fetchPage: async (position, size) => {
          this.assertOpen();
          const page = await this.http.request<Page>('GET', '/v1/events', {
            query: { after: position, limit: size, ...eventsQuery(filter) },
            retry: true,
          });
          return this.upcastPage(page);
        },
      };
    });
  }

  /** A page with this client's upcasters applied (the server's store applies its own first). */
  private upcastPage(page: Page): Page {
    return this.upcast === null ? page : { events: this.upcast([...page.events]), next: page.next };
  }

  /** The server's store's schema status, from `/health`. */
  async migrationStatus(): Promise<MigrationStatus> {
    this.assertOpen();
    const r = await this.http.request<{
      migrations: { current?: number; expected?: number; error?: string };
    }>('GET', '/health', { retry: true, answerStatuses: [503] });
    const { current, expected, error } = r.migrations;
    if (current === undefined || expected === undefined) {
      throw new IdemError(
        'unavailable',
        `the server does not report its store's migrations${error === undefined ? '' : `: ${error}`}`,
      );
    }
    return { current, expected };
  }

  /** `POST /v1/subjects/:subject/shred` (admin scope): deletes the subject's key in the server's store. */
  async shred(subject: string): Promise<ShredResult> {
    this.assertOpen();
    validateSubject(subject, 'subject');
    // Safe to repeat: a second shred finds no key and reports shredded: false.
    return this.http.request<ShredResult>('POST', `/v1/subjects/${encodeURIComponent(subject)}/shred`, {
      retry: true,
    });
  }

  /** `GET /v1/shreds` (read scope, a token not limited to some streams): the server's shred log. */
  async shreds(afterSeq: number, limit?: number): Promise<ShredRecord[]> {
    this.assertOpen();
    const r = validateShredsRange(afterSeq, limit);
    const page = await this.http.request<{ shreds: ShredRecord[] }>('GET', '/v1/shreds', {
      query: { after: r.after, limit: r.limit },
      retry: true,
    });
    return page.shreds;
  }

  async headPosition(): Promise<number> {
    this.assertOpen();
    // A read past every position returns no events but still reports the head.
    const r = await this.http.request<{ head: number }>('GET', '/v1/events', {
      query: { after: Number.MAX_SAFE_INTEGER, limit: 1 },
      retry: true,
    });
    return r.head;
  }

  async streamVersion(stream: string): Promise<number> {
    this.assertOpen();
    validateStreamName(stream);
    const r = await this.http.request<{ version: number }>(
      'GET',
      `/v1/streams/${encodeURIComponent(stream)}/events`,
      {
        query: { fromVersion: Number.MAX_SAFE_INTEGER, limit: 1 },
        retry: true,
      },
    );
    return r.version;
  }

  async subscribe(consumer: string, options: SubscribeOptions = {}): Promise<Subscription> {
    this.assertOpen();
    const sub = await openRemoteSubscription(
      {
        wsUrl: this.wsUrl,
        headers: this.http.authHeaders,
        onEnd: (s) => this.subscriptions.delete(s),
        upcast: this.upcast,
      },
      consumer,
      options,
    );
    if (this.closed) {
      await sub.close();
      throw new ClosedError('remote store');
    }
    this.subscriptions.add(sub);
    return sub;
  }

  /** Closes this client's subscriptions (releasing their leases); the server and its store stay up. Safe to call twice. */
  async close(): Promise<void> {
    this.closed = true;
    this.appends.close();
    await Promise.all([...this.subscriptions].map((s) => s.close()));
  }

  private assertOpen(): void {
    if (this.closed) throw new ClosedError('remote store');
  }

  private consumerPath(name: string, rest = ''): string {
    validateConsumerName(name, 'name');
    return `/v1/consumers/${encodeURIComponent(name)}${rest}`;
  }

  private consumerAdmin(): ConsumerAdmin {
    return {
      list: async () => {
        this.assertOpen();
        return (
          await this.http.request<{ consumers: ConsumerInfo[] }>('GET', '/v1/consumers', { retry: true })
        ).consumers;
      },
      get: async (name) => {
        this.assertOpen();
        return this.http.request<ConsumerInfo>('GET', this.consumerPath(name), { retry: true });
      },
      reset: async (name, position) => {
        this.assertOpen();
        validatePosition(position, 'position');
        await this.http.request('POST', this.consumerPath(name, '/reset'), { body: { position } });
      },
      setLedgerHorizon: async (name, position) => {
        this.assertOpen();
        validatePosition(position, 'position');
        // Safe to repeat: it sets the same value again.
        await this.http.request('PUT', this.consumerPath(name, '/ledger-horizon'), {
          body: { position },
          retry: true,
        });
      },
      delete: async (name) => {
        this.assertOpen();
        await this.http.request('DELETE', this.consumerPath(name));
      },
      release: async (name) => {
        this.assertOpen();
        // Safe to repeat: a second release finds no owner and changes nothing.
        await this.http.request('POST', this.consumerPath(name, '/release'), { retry: true });
      },
      pause: async (name, options = {}) => {
        this.assertOpen();
        checkKnownKeys(options, CONSUMER_PAUSE_OPTION_KEYS, 'options');
        // Safe to repeat: pausing a paused consumer changes nothing.
        await this.http.request('POST', this.consumerPath(name, '/pause'), {
          body: options.by === undefined ? {} : { by: options.by },
          retry: true,
        });
      },
      resume: async (name) => {
        this.assertOpen();
        await this.http.request('POST', this.consumerPath(name, '/resume'), { retry: true });
      },
      heartbeatMember: async (name, member, ttlMs) => {
        this.assertOpen();
        // Safe to repeat: a heartbeat renews the same member's lease.
        const r = await this.http.request<{ members: (GroupMember | string)[] }>(
          'POST',
          this.consumerPath(name, '/members'),
          {
            body: { member, ttlMs },
            retry: true,
          },
        );
        // An older server lists names alone: their expiries are unknown (members look every TTL/3).
        return r.members.map((m) => (typeof m === 'string' ? { member: m, leaseExpiresAt: null } : m));
      },
      leaveGroup: async (name, member) => {
        this.assertOpen();
        await this.http.request('POST', this.consumerPath(name, '/members/leave'), {
          body: { member },
          retry: true,
        });
      },
    };
  }

  private deadLetterAdmin(): DeadLetterAdmin {
    const act = async (
      action: 'retry' | 'skip',
      consumer: string,
      selector: DeadLetterSelector,
      by?: string,
    ) => {
      this.assertOpen();
      checkKnownKeys(selector, DEAD_LETTER_SELECTOR_KEYS, 'selector');
      const body: Record<string, unknown> = { ...selector };
      if (by !== undefined) body.by = by;
      const r = await this.http.request<{ count: number }>(
        'POST',
        this.consumerPath(consumer, `/dead-letters/${action}`),
        { body },
      );
      return r.count;
    };
    // The server acts on a bounded number of entities per request and says where to go on.
    const many = async (
      action: 'retry' | 'skip',
      consumer: string,
      options: DeadLetterBulkSkipOptions,
    ): Promise<DeadLetterBulkResult> => {
      const { onProgress, limit, by, error } = options;
      if (onProgress !== undefined && typeof onProgress !== 'function')
        throw new InvalidInputError('onProgress', 'must be a function');
      const total: DeadLetterBulkResult = { entities: 0, events: 0, last: null, done: false };
      let after = options.after;
      for (;;) {
        this.assertOpen();
        const body: Record<string, unknown> = error === undefined ? { all: true } : { error };
        if (limit !== undefined) body.limit = limit - total.entities;
        if (after !== undefined) body.after = after;
        if (by !== undefined) body.by = by;
        const r = await this.http.request<DeadLetterBulkResult>(
          'POST',
          this.consumerPath(consumer, `/dead-letters/${action}`),
          { body },
        );
        total.entities += r.entities;
        total.events += r.events;
        total.done = r.done;
        if (r.last !== null) total.last = after = r.last;
        if (r.entities > 0) onProgress?.({ ...total });
        if (r.done || r.entities === 0 || (limit !== undefined && total.entities >= limit)) return total;
      }
    };
    return {
      list: async (consumer, options = {}) => {
        this.assertOpen();
        checkKnownKeys(options, DEAD_LETTER_LIST_OPTION_KEYS, 'options');
        const query = options.all ? { all: true } : {};
        const r = await this.http.request<{ deadLetters: DeadLetter[] }>(
          'GET',
          this.consumerPath(consumer, '/dead-letters'),
          {
            query,
            retry: true,
          },
        );
        return r.deadLetters;
      },
      retry: (consumer, selector) => act('retry', consumer, selector),
      skip: async (consumer, selector, options = {}) => {
        checkKnownKeys(options, DEAD_LETTER_SKIP_OPTION_KEYS, 'options');
        return act('skip', consumer, selector, options.by);
      },
      retryMany: (consumer, options = {}) => {
        checkKnownKeys(options, DEAD_LETTER_BULK_OPTION_KEYS, 'options');
        return many('retry', consumer, options);
      },
      skipMany: (consumer, options = {}) => {
        checkKnownKeys(options, DEAD_LETTER_BULK_SKIP_OPTION_KEYS, 'options');
        return many('skip', consumer, options);
      },
    };
  }
}

/** A normalised filter as the query of `GET /v1/events`: the lists, and a partition as two numbers. */
function eventsQuery(filter: EventFilter): Record<string, readonly string[] | number> {
  const { partition, ...lists } = filter;
  if (!partition) return lists;
  return { ...lists, partitionCount: partition.count, partitionIndex: partition.index };
}
