import { ConsumerBusyError, InvalidInputError, NotFoundError } from '../core/errors.js';
import { checkKnownKeys } from '../core/knownKeys.js';
import {
  CONSUMER_PAUSE_OPTION_KEYS,
  type ConsumerAdmin,
  type ConsumerInfo,
  type ConsumerPause,
  type ConsumerPauseOptions,
} from '../core/subscription.js';
import { validateConsumerName, validateLabel, validatePosition } from '../core/validation.js';
import { defaultActor } from './actor.js';
import { consumerInfo } from './consumerInfo.js';
import { belowHorizon } from '../core/ledgerRetention.js';
import type {
  AdminResult,
  ForceReleaseResult,
  PauseResult,
  SubscriptionStateBackend,
} from './stateBackend.js';
import type { SubscriptionSource } from './subscriptionSource.js';

const LAG_QUERIES_AT_ONCE = 8;

/** `consumers.*` over a state backend and the store's reads. */
export class EngineConsumerAdmin implements ConsumerAdmin {
  constructor(
    private readonly source: SubscriptionSource,
    private readonly backend: SubscriptionStateBackend,
    /** Tells this process's owner of the consumer, if any, at once (others learn at their next renewal). */
    private readonly paused: (name: string, pause: ConsumerPause | null) => void,
  ) {}

  async list(): Promise<ConsumerInfo[]> {
    const head = await this.source.headPosition();
    const states = await this.backend.list();
    const out: ConsumerInfo[] = [];
    // A few lag queries at a time: on a store whose reads are round trips they overlap.
    for (let i = 0; i < states.length; i += LAG_QUERIES_AT_ONCE) {
      const some = states.slice(i, i + LAG_QUERIES_AT_ONCE);
      out.push(...(await Promise.all(some.map((s) => consumerInfo(this.source, s, head)))));
    }
    return out;
  }

  async get(name: string): Promise<ConsumerInfo> {
    validateConsumerName(name, 'name');
    const head = await this.source.headPosition();
    const state = await this.backend.get(name);
    if (!state) throw new NotFoundError('consumer', name);
    return consumerInfo(this.source, state, head);
  }

  async reset(name: string, position: number): Promise<void> {
    validateConsumerName(name, 'name');
    validatePosition(position, 'position');
    const head = await this.source.headPosition();
    if (position > head)
      throw new InvalidInputError('position', `must not exceed the head position (${head})`);
    const horizon = await this.backend.ledgerHorizon(name);
    if (position < horizon) throw belowHorizon(name, horizon, 'position', `${position} is`);
    check(name, await this.backend.reset(name, position));
  }

  async setLedgerHorizon(name: string, position: number): Promise<void> {
    validateConsumerName(name, 'name');
    validatePosition(position, 'position');
    await this.backend.setLedgerHorizon(name, position);
  }

  async delete(name: string): Promise<void> {
    validateConsumerName(name, 'name');
    check(name, await this.backend.delete(name));
  }

  async release(name: string): Promise<void> {
    validateConsumerName(name, 'name');
    check(name, await this.backend.forceRelease(name));
  }

  async pause(name: string, options: ConsumerPauseOptions = {}): Promise<void> {
    validateConsumerName(name, 'name');
    checkKnownKeys(options, CONSUMER_PAUSE_OPTION_KEYS, 'options');
    const by = validateLabel(options.by ?? defaultActor(), 'by');
    const result = await this.backend.setPause(name, { reason: 'operator', by });
    check(name, result);
    if (result.ok && result.changed) this.paused(name, result.pause);
  }

  async resume(name: string): Promise<void> {
    validateConsumerName(name, 'name');
    const result = await this.backend.setPause(name, null);
    check(name, result);
    if (result.ok && result.changed) this.paused(name, null);
  }
}

function check(name: string, result: AdminResult | ForceReleaseResult | PauseResult): void {
  if (result.ok) return;
  if (result.reason === 'not_found') throw new NotFoundError('consumer', name);
  throw new ConsumerBusyError(name, result.owner, result.leaseExpiresAt);
}
