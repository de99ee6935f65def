import { createConsumer, type Consumer } from './consumer.js';
import {
  CONSUMER_OPTION_KEYS,
  type ConsumerBaseOptions,
  type FilterOption,
  type HandlerOption,
  type AnyEvents,
} from './options.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';
import { InvalidInputError } from '../core/errors.js';
import { validateConsumerName } from '../core/validation.js';
import { defaultEffectScope, parseVersionedName } from '../core/versionedName.js';
import { withOutbox } from '../effects/outbox.js';
import { promoteConsumer } from '../effects/versions.js';
import type { ActiveVersionRecord } from '../core/effectTypes.js';
import type { EventStore } from '../core/eventStore.js';

/** The consumer options of the new version (but its name and start), and the rebuild's own. */
export type RebuildOptions<Tx> = Omit<ConsumerBaseOptions<Tx>, 'name' | 'from' | 'source'> & {
  /** The idem store to rebuild from (promotion reads the new version's cursor there). */
  source: EventStore;
} & FilterOption<AnyEvents> &
  HandlerOption<Tx> &
  RebuildSettings;

interface RebuildSettings {
  /** The version being replaced, which keeps serving meanwhile, e.g. `billing_v2`. */
  from: string;
  /** The new version, e.g. `billing_v3`: same base name, its own cursor, ledger and (via `ctx.tableSuffix`) tables. */
  as: string;
  /** How often `onProgress` is called, in ms. @default 1000 */
  progressIntervalMs?: number;
  onProgress?: (progress: RebuildProgress) => void;
}

const { name: _name, from: _from, ...REBUILT_CONSUMER_KEYS } = CONSUMER_OPTION_KEYS;
const REBUILD_OPTION_KEYS = {
  ...REBUILT_CONSUMER_KEYS,
  from: true,
  as: true,
  progressIntervalMs: true,
  onProgress: true,
} as const satisfies KnownKeys<RebuildOptions<unknown>>;

export interface RebuildProgress {
  name: string;
  rebuildOf: string;
  /** The new version's acknowledged position and the store's head. */
  position: number;
  head: number;
  /** Events the new version handled (processed + duplicates) so far in this run. */
  events: number;
  /** Handled events per second over the last interval. */
  eventsPerSecond: number;
  /** Store positions passed per second over the last interval. */
  positionsPerSecond: number;
  /** Seconds until the cursor reaches the head at the current pace; null when unknown (no progress yet). */
  etaSeconds: number | null;
  elapsedSeconds: number;
  /** The consumer reached the head and is live. */
  caughtUp: boolean;
  state: string;
}

export interface Rebuild {
  readonly name: string;
  readonly consumer: Consumer;
  /** Records the new version (rebuilding `from`, its live point = the head now) and starts it from the beginning. */
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Samples the progress now. */
  progress(): Promise<RebuildProgress>;
  whenCaughtUp(options?: { timeoutMs?: number }): Promise<void>;
  /** `promoteConsumer` for the new version: refused until it has caught up. */
  promote(): Promise<ActiveVersionRecord>;
}

class RebuildRun<Tx> implements Rebuild {
  readonly name: string;
  readonly consumer: Consumer;
  private readonly from: string;
  private started = 0;
  private last: { at: number; position: number; events: number } | null = null;
  private rates = { events: 0, positions: 0 };
  private timer: NodeJS.Timeout | null = null;
  /** The head up to which `whenCaughtUp` confirmed everything handled. */
  private caughtUpTo = -1;

  constructor(private readonly o: RebuildOptions<Tx>) {
    checkKnownKeys(o, REBUILD_OPTION_KEYS, '');
    this.from = validateConsumerName(o.from, 'from');
    this.name = validateConsumerName(o.as, 'as');
    if (this.name === this.from)
      throw new InvalidInputError('as', 'must differ from the version it rebuilds');
    const a = parseVersionedName(this.name);
    const b = parseVersionedName(this.from);
    if (a.base !== b.base && o.effects?.scope === undefined) {
      throw new InvalidInputError(
        'as',
        `must be a version of the same consumer (e.g. ${b.base}_v${(b.version ?? 1) + 1}), or give effects.scope`,
      );
    }
    if (a.version === null)
      throw new InvalidInputError(
        'as',
        'must end in a version suffix such as _v3, so the projection can pick fresh tables',
      );
    const { from: _from, as: _as, progressIntervalMs: _p, onProgress: _op, ...consumerOptions } = o;
    this.consumer = createConsumer<Tx>({ ...consumerOptions, name: this.name, from: 'start' });
  }

  async start(): Promise<void> {
    const effects = this.o.effects ?? {};
    const liveFrom =
      effects.liveFrom === 'start'
        ? 0
        : typeof effects.liveFrom === 'number'
          ? effects.liveFrom
          : await this.o.source.headPosition();
    await withOutbox(this.o.target, (ob, tx) =>
      ob.registerVersion(tx, {
        consumer: this.name,
        base: parseVersionedName(this.name).base,
        scope: effects.scope ?? defaultEffectScope(this.name),
        liveFrom,
        rebuildOf: this.from,
      }),
    );
    this.started = Date.now();
    await this.consumer.start();
    const every = this.o.progressIntervalMs ?? 1000;
    if (this.o.onProgress) {
      const report = this.o.onProgress;
      this.timer = setInterval(() => {
        void this.progress().then(report, () => undefined);
      }, every);
      this.timer.unref();
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.consumer.stop();
  }

  async progress(): Promise<RebuildProgress> {
    const now = Date.now();
    const head = await this.o.source.headPosition();
    const status = this.consumer.status();
    const m = this.consumer.metrics();
    const events = m.processed + m.duplicates;
    const position = status.position;
    if (this.last && now - this.last.at >= 200) {
      const dt = (now - this.last.at) / 1000;
      this.rates = {
        events: (events - this.last.events) / dt,
        positions: (position - this.last.position) / dt,
      };
      this.last = { at: now, position, events };
    } else if (!this.last) {
      this.last = { at: now, position, events };
    }
    // Live means the subscription reached the head; with a filter the cursor may stay below it.
    const caughtUp = status.phase === 'live' || position >= head || this.caughtUpTo >= head;
    const remaining = caughtUp ? 0 : Math.max(0, head - position);
    const eta = remaining === 0 ? 0 : this.rates.positions > 0 ? remaining / this.rates.positions : null;
    return {
      name: this.name,
      rebuildOf: this.from,
      position,
      head,
      events,
      eventsPerSecond: Math.round(this.rates.events),
      positionsPerSecond: Math.round(this.rates.positions),
      etaSeconds: eta === null ? null : Math.ceil(eta),
      elapsedSeconds: this.started === 0 ? 0 : Math.round((now - this.started) / 1000),
      caughtUp,
      state: `${status.state}/${status.phase}`,
    };
  }

  async whenCaughtUp(options?: { timeoutMs?: number }): Promise<void> {
    const head = await this.o.source.headPosition();
    await this.consumer.whenCaughtUp(options);
    this.caughtUpTo = Math.max(this.caughtUpTo, head);
  }

  promote(): Promise<ActiveVersionRecord> {
    return promoteConsumer({ source: this.o.source, target: this.o.target, name: this.name });
  }
}

/**
 * Rebuilds a consumer as a new version: `as` reads the store from the beginning into the tables its
 * projection picks with `ctx.tableSuffix`, while `from` keeps serving. Effects of history are
 * suppressed (the version's live point is the head when the rebuild starts), and effects `from` already
 * recorded are not recorded again (shared scope). Promote once caught up: `rebuild.promote()`.
 */
export function rebuildConsumer<Tx>(options: RebuildOptions<Tx>): Rebuild {
  if (options === null || typeof options !== 'object')
    throw new InvalidInputError('options', 'must be an object');
  return new RebuildRun(options);
}
