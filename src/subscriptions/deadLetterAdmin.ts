import { InvalidInputError, NotFoundError } from '../core/errors.js';
import { checkKnownKeys } from '../core/knownKeys.js';
import {
  DEAD_LETTER_LIST_OPTION_KEYS,
  DEAD_LETTER_SELECTOR_KEYS,
  DEAD_LETTER_SKIP_OPTION_KEYS,
  type DeadLetter,
  type DeadLetterAdmin,
  type DeadLetterListOptions,
  type DeadLetterSelector,
  type DeadLetterSkipOptions,
} from '../core/subscription.js';
import { normalizeUuid } from '../core/uuid.js';
import { validateConsumerName, validateLabel, validateStreamName } from '../core/validation.js';
import type { DeadLetterRecord, SubscriptionStateBackend } from './stateBackend.js';
import { defaultActor } from './actor.js';

/** `deadLetters.*` over a state backend. `changed` tells live owners to look for retried entries. */
export class EngineDeadLetterAdmin implements DeadLetterAdmin {
  constructor(
    private readonly backend: SubscriptionStateBackend,
    private readonly changed: () => void,
  ) {}

  async list(consumer: string, options: DeadLetterListOptions = {}): Promise<DeadLetter[]> {
    checkKnownKeys(options, DEAD_LETTER_LIST_OPTION_KEYS, 'options');
    await this.existing(consumer);
    if (options.all !== undefined && typeof options.all !== 'boolean')
      throw new InvalidInputError('all', 'must be a boolean');
    const rows = await this.backend.deadLetters(consumer, { all: options.all ?? false });
    return rows.map(toDeadLetter);
  }

  async retry(consumer: string, selector: DeadLetterSelector): Promise<number> {
    await this.existing(consumer);
    const n = await this.backend.retry(consumer, checkSelector(selector));
    if (n > 0) this.changed();
    return n;
  }

  async skip(
    consumer: string,
    selector: DeadLetterSelector,
    options: DeadLetterSkipOptions = {},
  ): Promise<number> {
    checkKnownKeys(options, DEAD_LETTER_SKIP_OPTION_KEYS, 'options');
    await this.existing(consumer);
    const by = validateLabel(options.by ?? defaultActor(), 'by');
    const n = await this.backend.skip(consumer, checkSelector(selector), by);
    if (n > 0) this.changed();
    return n;
  }

  private async existing(consumer: string): Promise<void> {
    validateConsumerName(consumer);
    if (!(await this.backend.get(consumer))) throw new NotFoundError('consumer', consumer);
  }
}

function checkSelector(selector: unknown): DeadLetterSelector {
  if (selector === null || typeof selector !== 'object') {
    throw new InvalidInputError('selector', 'must be { stream } or { id }');
  }
  checkKnownKeys(selector, DEAD_LETTER_SELECTOR_KEYS, 'selector');
  const s = selector as Record<string, unknown>;
  if ('stream' in s && !('id' in s)) return { stream: validateStreamName(s.stream, 'selector.stream') };
  if ('id' in s && !('stream' in s)) {
    // Event ids are UUIDs: anything else (control characters included) matches no dead letter.
    const id = typeof s.id === 'string' ? normalizeUuid(s.id) : null;
    if (id === null) throw new InvalidInputError('selector.id', 'must be an event id (a UUID)');
    return { id };
  }
  throw new InvalidInputError('selector', 'must be { stream } or { id }, not both');
}

function toDeadLetter(r: DeadLetterRecord): DeadLetter {
  return {
    consumer: r.consumer,
    event: r.event,
    reason: r.reason,
    error: r.error,
    attempts: r.attempts,
    status: r.status,
    behind: r.behind,
    parkedAt: r.parkedAt,
    skippedBy: r.skippedBy,
    skippedAt: r.skippedAt,
  };
}
