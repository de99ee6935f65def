import { InvalidInputError, NotFoundError } from '../core/errors.js';
import { checkKnownKeys } from '../core/knownKeys.js';
import {
  DEAD_LETTER_BULK_OPTION_KEYS,
  DEAD_LETTER_BULK_SKIP_OPTION_KEYS,
  DEAD_LETTER_LIST_OPTION_KEYS,
  DEAD_LETTER_SELECTOR_KEYS,
  DEAD_LETTER_SKIP_OPTION_KEYS,
  type DeadLetter,
  type DeadLetterAdmin,
  type DeadLetterBulkOptions,
  type DeadLetterBulkResult,
  type DeadLetterBulkSkipOptions,
  type DeadLetterListOptions,
  type DeadLetterSelector,
  type DeadLetterSkipOptions,
} from '../core/subscription.js';
import { normalizeUuid } from '../core/uuid.js';
import { boundedInt, validateConsumerName, validateLabel, validateStreamName } from '../core/validation.js';
import type { DeadLetterRecord, DeadLetterStreamQuery, SubscriptionStateBackend } from './stateBackend.js';
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

  async retryMany(consumer: string, options: DeadLetterBulkOptions = {}): Promise<DeadLetterBulkResult> {
    checkKnownKeys(options, DEAD_LETTER_BULK_OPTION_KEYS, 'options');
    const bulk = checkBulk(options);
    await this.existing(consumer);
    return this.many(consumer, bulk, 'parked', (streams) => this.backend.retry(consumer, { streams }));
  }

  async skipMany(consumer: string, options: DeadLetterBulkSkipOptions = {}): Promise<DeadLetterBulkResult> {
    checkKnownKeys(options, DEAD_LETTER_BULK_SKIP_OPTION_KEYS, 'options');
    const bulk = checkBulk(options);
    const by = validateLabel(options.by ?? defaultActor(), 'by');
    await this.existing(consumer);
    return this.many(consumer, bulk, 'active', (streams) => this.backend.skip(consumer, { streams }, by));
  }

  /**
   * Pages through the matching streams in name order, `BULK_PAGE` at a time, acting on each page in
   * one transaction: memory stays bounded by a page whatever the number of dead letters, and live
   * owners start redelivering the first page while the next ones are marked.
   */
  private async many(
    consumer: string,
    bulk: CheckedBulk,
    statuses: DeadLetterStreamQuery['statuses'],
    act: (streams: readonly string[]) => Promise<number>,
  ): Promise<DeadLetterBulkResult> {
    const result: DeadLetterBulkResult = { entities: 0, events: 0, last: null, done: false };
    let after = bulk.after;
    const query = (limit: number): Promise<string[]> =>
      this.backend.deadLetterStreams(consumer, {
        statuses,
        after,
        limit,
        ...(bulk.error === undefined ? {} : { error: bulk.error }),
      });
    while (result.entities < bulk.limit) {
      const page = Math.min(BULK_PAGE, bulk.limit - result.entities);
      const streams = await query(page);
      if (streams.length > 0) {
        result.events += await act(streams);
        result.entities += streams.length;
        result.last = after = streams[streams.length - 1]!;
        this.changed();
        bulk.onProgress?.({ ...result });
      }
      if (streams.length < page) {
        result.done = true;
        return result;
      }
    }
    // Stopped by the limit: done only when nothing matching is left after the last one.
    result.done = (await query(1)).length === 0;
    return result;
  }

  private async existing(consumer: string): Promise<void> {
    validateConsumerName(consumer);
    if (!(await this.backend.get(consumer))) throw new NotFoundError('consumer', consumer);
  }
}

/** Streams per page (and per transaction) of a bulk retry or skip. */
export const BULK_PAGE = 500;
/** The largest `limit` of a bulk retry or skip. */
export const MAX_BULK_LIMIT = 1_000_000;
const MAX_ERROR_MATCH = 1000;

interface CheckedBulk {
  error: string | undefined;
  limit: number;
  after: string | null;
  onProgress: ((progress: DeadLetterBulkResult) => void) | undefined;
}

function checkBulk(options: DeadLetterBulkOptions): CheckedBulk {
  const { error, after, onProgress } = options;
  if (
    error !== undefined &&
    (typeof error !== 'string' || error.length === 0 || error.length > MAX_ERROR_MATCH)
  )
    throw new InvalidInputError('error', `must be a string of 1 to ${MAX_ERROR_MATCH} characters`);
  if (onProgress !== undefined && typeof onProgress !== 'function')
    throw new InvalidInputError('onProgress', 'must be a function');
  return {
    error,
    limit: boundedInt(options.limit, 'limit', 1, MAX_BULK_LIMIT, MAX_BULK_LIMIT),
    after: after === undefined ? null : validateStreamName(after, 'after'),
    onProgress,
  };
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
    redrives: r.redrives,
    redriveAt: r.redriveAt,
    parkedAt: r.parkedAt,
    skippedBy: r.skippedBy,
    skippedAt: r.skippedAt,
  };
}
