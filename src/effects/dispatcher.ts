import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ConsumerTarget } from '../core/consumerTarget.js';
import { InvalidInputError } from '../core/errors.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';
import { backoffDelay, sleep } from '../core/backoff.js';
import { outboxFor } from './outbox.js';
import type { OutboxDialect } from '../core/effectOutbox.js';
import { idempotencyKey } from '../core/versionedName.js';
import { EFFECT_STATUSES, type ClaimedEffect, type EffectCounts } from '../core/effectTypes.js';
import { openSpan, type OpenSpan } from '../core/tracing.js';

/** What an effect handler learns besides the payload. */
export interface EffectCallInfo {
  /** Pass this to the external system (e.g. an `Idempotency-Key` header): the same on every attempt of the effect. */
  idempotencyKey: string;
  scope: string;
  key: string;
  kind: string;
  /** 1 on the first attempt; later attempts follow failures or a dispatcher that died during the call. */
  attempt: number;
}

/** Calls the external system. What it returns (JSON) is recorded on the row as `result`. */
export type EffectHandler<P = unknown> = (payload: P, info: EffectCallInfo) => unknown;

export type EffectHandlers = Record<string, EffectHandler<never>>;

export interface EffectRetryOptions {
  /** Attempts per effect, the first included, before the row is `failed`. @default 5 */
  attempts?: number;
  /** @default 'exponential' (with jitter) */
  backoff?: 'exponential' | 'fixed';
  /** Delay before the first retry, in ms (every retry with `fixed`). @default 1000 */
  initialDelayMs?: number;
  /** Longest delay, in ms. @default 60000 */
  maxDelayMs?: number;
}

const EFFECT_RETRY_OPTION_KEYS = {
  attempts: true,
  backoff: true,
  initialDelayMs: true,
  maxDelayMs: true,
} as const satisfies KnownKeys<EffectRetryOptions>;

export interface EffectDispatcherOptions<Tx> {
  target: ConsumerTarget<Tx>;
  /** One handler per effect kind; the dispatcher claims only rows of these kinds. */
  handlers: EffectHandlers;
  retry?: EffectRetryOptions;
  /**
   * How long a claim is held, in ms. While a call runs, the dispatcher renews the lease every third of
   * it; a row whose lease expires (its dispatcher died, or could not renew) is claimed again and
   * called again with the same idempotency key. @default 30000
   */
  leaseMs?: number;
  /** Pause between polls when nothing is due, in ms. @default 250 */
  pollIntervalMs?: number;
  /** Rows claimed (and called concurrently) per round. @default 10 */
  batchSize?: number;
  /** This dispatcher's label on the rows it holds. @default host:pid:random */
  owner?: string;
  metrics?: { registry: Registry; prefix?: string };
  /** Called after each failed attempt (for logging). */
  onFailure?: (
    error: Error,
    effect: { idempotencyKey: string; kind: string; attempt: number; final: boolean },
  ) => void;
}

/** The dispatcher's settings: every option but `target` and `handlers` (as `createConsumer` takes them). */
export const DISPATCHER_SETTING_KEYS = {
  retry: true,
  leaseMs: true,
  pollIntervalMs: true,
  batchSize: true,
  owner: true,
  metrics: true,
  onFailure: true,
} as const satisfies KnownKeys<Omit<EffectDispatcherOptions<unknown>, 'target' | 'handlers'>>;

const DISPATCHER_METRICS_KEYS = { registry: true, prefix: true } as const satisfies KnownKeys<
  NonNullable<EffectDispatcherOptions<unknown>['metrics']>
>;

const EFFECT_DISPATCHER_OPTION_KEYS = {
  ...DISPATCHER_SETTING_KEYS,
  target: true,
  handlers: true,
} as const satisfies KnownKeys<EffectDispatcherOptions<unknown>>;

export interface EffectDispatcherMetrics {
  /** Calls started, completed, retried after a failure, given up (`failed`), and completions refused because the lease was lost. */
  calls: number;
  done: number;
  retried: number;
  failed: number;
  lostLeases: number;
  /** Polls that failed (target unavailable). */
  pollErrors: number;
  lastError: string | null;
}

export interface EffectDispatcher {
  readonly owner: string;
  /** Starts polling in the background. */
  start(): Promise<void>;
  /** Stops polling and waits for the calls in flight to finish and be recorded. Safe to call twice. */
  stop(): Promise<void>;
  /** Claims and runs one round; resolves with the number of effects called. */
  runOnce(): Promise<number>;
  /** This process's counters. */
  metrics(): EffectDispatcherMetrics;
  /** Rows per status in the outbox: pending, done, failed, suppressed. */
  counts(): Promise<EffectCounts>;
}

function intOption(value: unknown, field: string, min: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min)
    throw new InvalidInputError(field, `must be an integer >= ${min}`);
  return value;
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

function resultJson(value: unknown): string {
  try {
    return JSON.stringify(value === undefined ? null : value) ?? 'null';
  } catch {
    return JSON.stringify(String(value));
  }
}

class Dispatcher<Tx> implements EffectDispatcher {
  readonly owner: string;
  private readonly outbox: OutboxDialect<Tx>;
  private readonly target: ConsumerTarget<Tx>;
  private readonly handlers: EffectHandlers;
  private readonly kinds: string[];
  private readonly attempts: number;
  private readonly backoff: 'exponential' | 'fixed';
  private readonly initialDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly leaseMs: number;
  private readonly pollMs: number;
  private readonly batchSize: number;
  private readonly onFailure: EffectDispatcherOptions<Tx>['onFailure'];
  private readonly m: EffectDispatcherMetrics = {
    calls: 0,
    done: 0,
    retried: 0,
    failed: 0,
    lostLeases: 0,
    pollErrors: 0,
    lastError: null,
  };
  private readonly prom: { calls: Counter<'outcome'> } | null = null;
  private loop: Promise<void> | null = null;
  private abort = new AbortController();
  private running = false;

  constructor(o: EffectDispatcherOptions<Tx>) {
    if (o === undefined) throw new InvalidInputError('options', 'must be an object');
    checkKnownKeys(o, EFFECT_DISPATCHER_OPTION_KEYS, '');
    checkKnownKeys(o.retry, EFFECT_RETRY_OPTION_KEYS, 'retry');
    checkKnownKeys(o.metrics, DISPATCHER_METRICS_KEYS, 'metrics');
    this.outbox = outboxFor(o.target);
    this.target = o.target;
    if (o.handlers === null || typeof o.handlers !== 'object')
      throw new InvalidInputError('handlers', 'must be an object of effect kind -> function');
    for (const [kind, h] of Object.entries(o.handlers)) {
      if (typeof h !== 'function') throw new InvalidInputError(`handlers.${kind}`, 'must be a function');
    }
    this.handlers = o.handlers;
    this.kinds = Object.keys(o.handlers);
    const r = o.retry ?? {};
    this.attempts = intOption(r.attempts, 'retry.attempts', 1, 5);
    const backoff = r.backoff ?? 'exponential';
    if (backoff !== 'exponential' && backoff !== 'fixed')
      throw new InvalidInputError('retry.backoff', "must be 'exponential' or 'fixed'");
    this.backoff = backoff;
    this.initialDelayMs = intOption(r.initialDelayMs, 'retry.initialDelayMs', 0, 1000);
    this.maxDelayMs = intOption(r.maxDelayMs, 'retry.maxDelayMs', 0, 60_000);
    this.leaseMs = intOption(o.leaseMs, 'leaseMs', 1, 30_000);
    this.pollMs = intOption(o.pollIntervalMs, 'pollIntervalMs', 1, 250);
    this.batchSize = intOption(o.batchSize, 'batchSize', 1, 10);
    if (o.owner !== undefined && (typeof o.owner !== 'string' || o.owner.length === 0))
      throw new InvalidInputError('owner', 'must be a non-empty string');
    this.owner = o.owner ?? `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    this.onFailure = o.onFailure;
    if (o.metrics !== undefined)
      this.prom = this.registerMetrics(o.metrics.registry, o.metrics.prefix ?? 'idem_');
  }

  private registerMetrics(registry: Registry, prefix: string): { calls: Counter<'outcome'> } {
    if (typeof registry?.registerMetric !== 'function')
      throw new InvalidInputError('metrics.registry', 'must be a prom-client Registry');
    const gaugeName = `${prefix}effects`;
    if (!registry.getSingleMetric(gaugeName)) {
      const counts = (): Promise<EffectCounts> => this.counts();
      new Gauge({
        name: gaugeName,
        help: 'Effect outbox rows by status (pending, done, failed, suppressed)',
        labelNames: ['status'],
        registers: [registry],
        async collect() {
          const c = await counts().catch(() => null);
          if (!c) return;
          for (const s of EFFECT_STATUSES) this.set({ status: s }, c[s]);
        },
      });
    }
    const callsName = `${prefix}effect_calls_total`;
    const calls =
      (registry.getSingleMetric(callsName) as Counter<'outcome'> | undefined) ??
      new Counter({
        name: callsName,
        help: 'Effect handler calls by outcome (done, retry, failed)',
        labelNames: ['outcome'],
        registers: [registry],
      });
    return { calls };
  }

  start(): Promise<void> {
    if (this.running) return Promise.resolve();
    this.running = true;
    this.abort = new AbortController();
    this.loop = this.run();
    return Promise.resolve();
  }

  private async run(): Promise<void> {
    while (this.running) {
      let n = 0;
      try {
        n = await this.runOnce();
      } catch (err) {
        this.m.pollErrors++;
        this.m.lastError = asError(err).message;
      }
      if (n === 0 && this.running) await sleep(this.pollMs, this.abort.signal);
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    this.abort.abort();
    await this.loop;
    this.loop = null;
  }

  async runOnce(): Promise<number> {
    if (this.kinds.length === 0) return 0;
    await this.target.migrate();
    const claimed = await this.target.transaction((t) =>
      this.outbox.claim(t.tx, {
        owner: this.owner,
        kinds: this.kinds,
        leaseMs: this.leaseMs,
        limit: this.batchSize,
      }),
    );
    await Promise.all(claimed.map((c) => this.call(c)));
    return claimed.length;
  }

  /** One dispatch in an `idem.effect` span, a child of the trace recorded with the row. */
  private async call(c: ClaimedEffect): Promise<void> {
    const span = openSpan('idem.effect', {
      kind: 'internal',
      parent: c.traceparent ?? undefined,
      attributes: {
        'idem.consumer': c.consumer,
        'idem.effect.scope': c.scope,
        'idem.effect.key': c.key,
        'idem.effect.kind': c.kind,
        'idem.effect.attempt': c.attempts,
      },
    });
    try {
      const outcome = await this.dispatch(c, span);
      span.setAttributes({ 'idem.outcome': outcome });
      span.end();
    } catch (err) {
      span.end(err);
      throw err;
    }
  }

  private async dispatch(c: ClaimedEffect, span: OpenSpan): Promise<'done' | 'retry' | 'failed' | 'lost'> {
    const handler = this.handlers[c.kind] as EffectHandler | undefined;
    const info: EffectCallInfo = {
      idempotencyKey: idempotencyKey(c.scope, c.key),
      scope: c.scope,
      key: c.key,
      kind: c.kind,
      attempt: c.attempts,
    };
    this.m.calls++;
    let result: unknown;
    // Renews the lease while the call runs, so a slow call is not taken over by another dispatcher.
    const heartbeat = setInterval(
      () => {
        this.target
          .transaction((t) => this.outbox.extendLease(t.tx, c.id, this.owner, this.leaseMs))
          .catch(() => undefined);
      },
      Math.max(1, Math.floor(this.leaseMs / 3)),
    );
    try {
      if (!handler) throw new Error(`no handler for effect kind "${c.kind}"`);
      result = await handler(c.payload, info);
    } catch (err) {
      clearInterval(heartbeat);
      const error = asError(err);
      const final = c.attempts >= this.attempts;
      const delay = final
        ? null
        : this.backoff === 'fixed'
          ? this.initialDelayMs
          : backoffDelay(c.attempts, this.initialDelayMs, this.maxDelayMs);
      const message = `${error.name}: ${error.message}`;
      const kept = await this.target.transaction((t) =>
        this.outbox.release(t.tx, c.id, this.owner, message, delay),
      );
      if (!kept) this.m.lostLeases++;
      else if (final) this.m.failed++;
      else this.m.retried++;
      this.prom?.calls.inc({ outcome: final ? 'failed' : 'retry' });
      this.onFailure?.(error, {
        idempotencyKey: info.idempotencyKey,
        kind: c.kind,
        attempt: c.attempts,
        final,
      });
      span.setAttributes({ 'idem.error': message });
      return !kept ? 'lost' : final ? 'failed' : 'retry';
    }
    clearInterval(heartbeat);
    const kept = await this.target.transaction((t) =>
      this.outbox.complete(t.tx, c.id, this.owner, resultJson(result)),
    );
    if (kept) this.m.done++;
    else this.m.lostLeases++;
    this.prom?.calls.inc({ outcome: 'done' });
    return kept ? 'done' : 'lost';
  }

  metrics(): EffectDispatcherMetrics {
    return { ...this.m };
  }

  async counts(): Promise<EffectCounts> {
    await this.target.migrate();
    return this.target.transaction((t) => this.outbox.counts(t.tx));
  }
}

/**
 * Dispatches the effect outbox of a target: claims due pending rows of the kinds it has handlers for
 * (several dispatcher processes may share a target), calls each handler with the effect's idempotency
 * key, records `done` with the result, retries failures with backoff, then marks them `failed`.
 */
export function createEffectDispatcher<Tx>(options: EffectDispatcherOptions<Tx>): EffectDispatcher {
  return new Dispatcher(options);
}
