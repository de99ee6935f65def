import { hostname, userInfo } from 'node:os';
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
import { streamPartition } from '../core/streamHash.js';
import { normalizeUuid } from '../core/uuid.js';
import { groupPartitions } from './groupRecords.js';
import { validateConsumerName, validateLabel, validateStreamName } from '../core/validation.js';
import type { DeadLetterRecord, SubscriptionStateBackend } from './stateBackend.js';

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

  /** The records holding the consumer's dead letters: its own, or a group's partitions by index. */
  private async existing(consumer: string): Promise<string[]> {
    validateConsumerName(consumer);
    if (await this.backend.get(consumer)) return [consumer];
    const parts = await groupPartitions(this.backend, consumer);
    if (!parts) throw new NotFoundError('consumer', consumer);
    return parts.map((p) => p.name);
  }
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
    parkedAt: r.parkedAt,
    skippedBy: r.skippedBy,
    skippedAt: r.skippedAt,
  };
}

function defaultActor(): string {
  try {
    return `${userInfo().username}@${hostname()}`;
  } catch {
    return `pid ${process.pid}@${hostname()}`;
  }
}
