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
import { streamPartition } from '../core/streamHash.js';
import { normalizeUuid } from '../core/uuid.js';
import { groupPartitions } from './groupRecords.js';
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
    const rows: DeadLetterRecord[] = [];
    for (const record of await this.existing(consumer)) {
      rows.push(...(await this.backend.deadLetters(record, { all: options.all ?? false })));
    }
    // A group's partitions each list theirs in position order: one list in position order.
    rows.sort((a, b) => a.event.position - b.event.position);
    return rows.map((r) => toDeadLetter(r, consumer));
  }

  async retry(consumer: string, selector: DeadLetterSelector): Promise<number> {
    const records = await this.existing(consumer);
    const checked = checkSelector(selector);
    let n = 0;
    for (const record of selectPartition(records, checked)) n += await this.backend.retry(record, checked);
    if (n > 0) this.changed();
    return n;
  }

  async skip(
    consumer: string,
    selector: DeadLetterSelector,
    options: DeadLetterSkipOptions = {},
  ): Promise<number> {
    checkKnownKeys(options, DEAD_LETTER_SKIP_OPTION_KEYS, 'options');
    const records = await this.existing(consumer);
    const by = validateLabel(options.by ?? defaultActor(), 'by');
    const checked = checkSelector(selector);
    let n = 0;
    for (const record of selectPartition(records, checked)) n += await this.backend.skip(record, checked, by);
    if (n > 0) this.changed();
    return n;
  }

  async retryMany(consumer: string, options: DeadLetterBulkOptions = {}): Promise<DeadLetterBulkResult> {
    checkKnownKeys(options, DEAD_LETTER_BULK_OPTION_KEYS, 'options');
    const bulk = checkBulk(options);
    const records = await this.existing(consumer);
    return this.many(records, bulk, 'parked', (record, streams) => this.backend.retry(record, { streams }));
  }

  async skipMany(consumer: string, options: DeadLetterBulkSkipOptions = {}): Promise<DeadLetterBulkResult> {
    checkKnownKeys(options, DEAD_LETTER_BULK_SKIP_OPTION_KEYS, 'options');
    const bulk = checkBulk(options);
    const by = validateLabel(options.by ?? defaultActor(), 'by');
    const records = await this.existing(consumer);
    return this.many(records, bulk, 'active', (record, streams) =>
      this.backend.skip(record, { streams }, by),
    );
  }

  /**
   * Pages through the matching streams in name order, `BULK_PAGE` at a time, acting on each page in
   * one transaction per record: memory stays bounded by a page whatever the number of dead letters,
   * and live owners start redelivering the first page while the next ones are marked. A group's
   * partitions (`records`, by index) each hold their own streams: a page is the first names of all
   * of them together, so `after` and `last` mean the same for a group as for one consumer.
   */
  private async many(
    records: string[],
    bulk: CheckedBulk,
    statuses: DeadLetterStreamQuery['statuses'],
    act: (record: string, streams: readonly string[]) => Promise<number>,
  ): Promise<DeadLetterBulkResult> {
    const result: DeadLetterBulkResult = { entities: 0, events: 0, last: null, done: false };
    let after = bulk.after;
    const query = async (limit: number): Promise<string[]> => {
      const names: string[] = [];
      for (const record of records)
        names.push(
          ...(await this.backend.deadLetterStreams(record, {
            statuses,
            after,
            limit,
            ...(bulk.error === undefined ? {} : { error: bulk.error }),
          })),
        );
      return records.length === 1 ? names : names.sort(compareNames).slice(0, limit);
    };
    while (result.entities < bulk.limit) {
      const page = Math.min(BULK_PAGE, bulk.limit - result.entities);
      const streams = await query(page);
      if (streams.length > 0) {
        if (records.length === 1) result.events += await act(records[0]!, streams);
        else
          for (const [index, part] of byPartition(streams, records.length))
            result.events += await act(records[index]!, part);
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

  /** The records holding the consumer's dead letters: its own, or a group's partitions by index. */
  private async existing(consumer: string): Promise<string[]> {
    validateConsumerName(consumer);
    if (await this.backend.get(consumer)) return [consumer];
    const parts = await groupPartitions(this.backend, consumer);
    if (!parts) throw new NotFoundError('consumer', consumer);
    return parts.map((p) => p.name);
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

/** Of a group's partition records, the one a stream's dead letters are in (all of them for an id). */
function selectPartition(records: string[], selector: DeadLetterSelector): string[] {
  if (records.length === 1 || !('stream' in selector)) return records;
  return [records[streamPartition(selector.stream, records.length)]!];
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

function toDeadLetter(r: DeadLetterRecord, consumer: string): DeadLetter {
  return {
    consumer,
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

/** Name order as the stores sort stream names (by code unit, as SQLite's BINARY and PostgreSQL's "C"). */
function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Streams grouped by their partition of `count`. */
function byPartition(streams: readonly string[], count: number): Map<number, string[]> {
  const out = new Map<number, string[]>();
  for (const s of streams) {
    const i = streamPartition(s, count);
    const list = out.get(i);
    if (list) list.push(s);
    else out.set(i, [s]);
  }
  return out;
}
