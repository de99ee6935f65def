import type { ConsumerTarget } from '../core/consumerTarget.js';
import { InvalidInputError } from '../core/errors.js';
import type { RecordedEvent } from '../core/event.js';
import type { ConsumerSource } from '../core/consumerSource.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';
import {
  DISPATCHER_SETTING_KEYS,
  createEffectDispatcher,
  type EffectDispatcher,
  type EffectDispatcherOptions,
  type EffectHandlers,
} from './dispatcher.js';
import { defaultEffectScope, idempotencyKey, parseVersionedName } from '../core/versionedName.js';
import { outboxFor } from './outbox.js';
import type { OutboxDialect } from '../core/effectOutbox.js';
import { activeTraceparent, traceparentOf } from '../core/tracing.js';
import {
  EFFECT_CALL_OPTION_KEYS,
  type ConsumerVersionRecord,
  type EffectCallOptions,
  type EffectWrite,
} from '../core/effectTypes.js';

/** The `effects` option of `createConsumer`. */
export interface ConsumerEffectsOptions<Tx = unknown> {
  /** Handlers per effect kind: when given, the consumer starts a dispatcher on its target with `start()` and stops it with `stop()`. */
  handlers?: EffectHandlers;
  /** Dispatcher settings (retry, lease, poll interval...) for the dispatcher started with the consumer. */
  dispatcher?: Omit<EffectDispatcherOptions<Tx>, 'target' | 'handlers'>;
  /**
   * Effects of events at or below the version's live point (history, replayed by a new version or a
   * rebuild) are recorded `suppressed` and never dispatched, unless their kind is set to `'dispatch'` here.
   */
  replay?: Record<string, 'dispatch' | 'suppress'>;
  /** The outbox key space. @default the consumer's base name (`billing` for `billing_v3`), shared by its versions */
  scope?: string;
  /**
   * The version's live point, fixed when the version first starts: `'head'` is the store's head then
   * (history is not re-fired), `'start'` treats every event as live (0), or a position. @default 'head'
   */
  liveFrom?: 'head' | 'start' | number;
}

const CONSUMER_EFFECTS_OPTION_KEYS = {
  handlers: true,
  dispatcher: true,
  replay: true,
  scope: true,
  liveFrom: true,
} as const satisfies KnownKeys<ConsumerEffectsOptions>;

const MAX_KIND = 200;
const MAX_KEY = 1000;

/** A consumer's effects: the live point, the outbox writes of `ctx.effect`, and the dispatcher started with it. */
export class ConsumerEffects<Tx> {
  readonly scope: string;
  private readonly outbox: OutboxDialect<Tx>;
  private readonly replay: Record<string, 'dispatch' | 'suppress'>;
  private readonly liveFrom: 'head' | 'start' | number;
  private version: ConsumerVersionRecord | null = null;
  private dispatcher: EffectDispatcher | null = null;

  constructor(
    private readonly consumer: string,
    private readonly target: ConsumerTarget<Tx>,
    private readonly source: Pick<ConsumerSource, 'headPosition'>,
    private readonly options: ConsumerEffectsOptions<Tx>,
  ) {
    this.outbox = outboxFor(target);
    if (
      options.scope !== undefined &&
      (typeof options.scope !== 'string' || !/^[A-Za-z0-9_.:-]{1,200}$/.test(options.scope))
    ) {
      throw new InvalidInputError('effects.scope', 'must be 1-200 letters, digits or _ . : -');
    }
    this.scope = options.scope ?? defaultEffectScope(consumer);
    const replay = options.replay ?? {};
    for (const [kind, mode] of Object.entries(replay)) {
      if (mode !== 'dispatch' && mode !== 'suppress')
        throw new InvalidInputError(`effects.replay.${kind}`, "must be 'dispatch' or 'suppress'");
    }
    this.replay = replay;
    const lf = options.liveFrom ?? 'head';
    if (lf !== 'head' && lf !== 'start' && !(typeof lf === 'number' && Number.isSafeInteger(lf) && lf >= 0)) {
      throw new InvalidInputError('effects.liveFrom', "must be 'head', 'start' or a position >= 0");
    }
    this.liveFrom = lf;
    if (options.handlers !== undefined) {
      // Validates the handlers and dispatcher options now, so a bad option fails createConsumer.
      this.dispatcher = createEffectDispatcher({
        ...(options.dispatcher ?? {}),
        target,
        handlers: options.handlers,
      });
    }
  }

  /** The recorded version (after `start`), with its live point. */
  get versionRecord(): ConsumerVersionRecord | null {
    return this.version;
  }

  private async livePoint(): Promise<number> {
    if (this.liveFrom === 'start') return 0;
    if (this.liveFrom === 'head') return this.source.headPosition();
    return this.liveFrom;
  }

  /** Records the version and its live point on its first start (kept afterwards), then starts the dispatcher if any. */
  async start(rebuildOf: string | null = null): Promise<ConsumerVersionRecord> {
    const liveFrom = await this.livePoint();
    this.version = await this.target.transaction((t) =>
      this.outbox.registerVersion(t.tx, {
        consumer: this.consumer,
        base: parseVersionedName(this.consumer).base,
        scope: this.scope,
        liveFrom,
        rebuildOf,
      }),
    );
    await this.dispatcher?.start();
    return this.version;
  }

  async stop(): Promise<void> {
    await this.dispatcher?.stop();
  }

  get effectDispatcher(): EffectDispatcher | null {
    return this.dispatcher;
  }

  /** `ctx.effect`: one outbox row in the handler's transaction, unless the key is already there. */
  async write(
    tx: Tx,
    event: RecordedEvent,
    kind: unknown,
    payload: unknown,
    options: EffectCallOptions = {},
  ): Promise<EffectWrite> {
    if (typeof kind !== 'string' || kind.length === 0 || kind.length > MAX_KIND) {
      throw new InvalidInputError('kind', `must be a string of 1-${MAX_KIND} characters`);
    }
    checkKnownKeys(options, EFFECT_CALL_OPTION_KEYS, 'options');
    const key = options.key ?? `${event.id}:${kind}`;
    if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY) {
      throw new InvalidInputError('key', `must be a string of 1-${MAX_KEY} characters`);
    }
    let json: string | undefined;
    try {
      json = JSON.stringify(payload === undefined ? null : payload);
    } catch (err) {
      throw new InvalidInputError('payload', `must be JSON-serialisable (${(err as Error).message})`);
    }
    if (json === undefined) throw new InvalidInputError('payload', 'must be JSON-serialisable');
    // Without a recorded version (the runtime did not call start), the first effect records one.
    this.version ??=
      (await this.outbox.getVersion(tx, this.consumer)) ??
      (await this.outbox.registerVersion(tx, {
        consumer: this.consumer,
        base: parseVersionedName(this.consumer).base,
        scope: this.scope,
        liveFrom: await this.livePoint(),
        rebuildOf: null,
      }));
    const history = event.position <= this.version.liveFrom;
    const status = history && this.replay[kind] !== 'dispatch' ? 'suppressed' : 'pending';
    const inserted = await this.outbox.insert(tx, {
      scope: this.scope,
      key,
      kind,
      payload: json,
      consumer: this.consumer,
      eventId: event.id,
      position: event.position,
      status,
      traceparent: traceparentOf(event.metadata) ?? activeTraceparent() ?? null,
    });
    return { key, idempotencyKey: idempotencyKey(this.scope, key), status: inserted ? status : 'existing' };
  }
}

/**
 * The consumer's effects, or null when its target has no outbox and no `effects` option was given
 * (a test double of a target, say): `ctx.effect` then refuses.
 */
export function resolveConsumerEffects<Tx>(
  name: string,
  target: ConsumerTarget<Tx>,
  source: Pick<ConsumerSource, 'headPosition'>,
  options: ConsumerEffectsOptions<Tx> | undefined,
): ConsumerEffects<Tx> | null {
  checkKnownKeys(options, CONSUMER_EFFECTS_OPTION_KEYS, 'effects');
  checkKnownKeys(options?.dispatcher, DISPATCHER_SETTING_KEYS, 'effects.dispatcher');
  try {
    outboxFor(target);
  } catch (err) {
    if (options === undefined) return null;
    throw err;
  }
  return new ConsumerEffects(name, target, source, options ?? {});
}
