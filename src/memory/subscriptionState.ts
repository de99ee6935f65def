import type { RecordedEvent } from '../core/event.js';
import { sameFilter, type EventFilter } from '../core/filter.js';
import { redriveDelayMs } from '../core/parkInfo.js';
import type { DeadLetterStatus, FailureInfo, PauseReason } from '../core/subscription.js';
import {
  behindReason,
  type AckResult,
  type AcquireResult,
  type AdminResult,
  type BackendSelector,
  type ConsumerRecord,
  type DeadLetterRecord,
  type DeadLetterStreamQuery,
  type Fenced,
  type ForceReleaseResult,
  type NewPause,
  type ParkBehindResult,
  type ParkRequest,
  type ParkResult,
  type PauseResult,
  type RegisterResult,
  type RenewResult,
  type SubscriptionStateBackend,
  type WriteResult,
} from '../subscriptions/stateBackend.js';

type Row = Omit<ConsumerRecord, 'parked'>;

const isActive = (s: DeadLetterStatus): boolean => s === 'parked' || s === 'retrying';

/**
 * Consumer state in process memory: the reference implementation of the state-backend SPI. Every
 * method runs synchronously, so each is trivially atomic. Returned objects are copies.
 */
export class MemorySubscriptionState implements SubscriptionStateBackend {
  private readonly consumers = new Map<string, Row>();
  /** consumer -> event id -> row, in insertion order (the engine parks in position order). */
  private readonly letters = new Map<string, Map<string, DeadLetterRecord>>();
  private readonly horizons = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  register(name: string, filter: EventFilter, startPosition: number): Promise<RegisterResult> {
    const row = this.consumers.get(name);
    if (row) {
      if (!sameFilter(row.filter, filter))
        return ok({ ok: false, reason: 'identity_conflict', existingFilter: clone(row.filter) });
      return ok({ ok: true, created: false, state: this.state(row) });
    }
    const at = this.iso();
    const created: Row = {
      name,
      filter: clone(filter),
      position: startPosition,
      owner: null,
      epoch: 0,
      leaseExpiresAt: null,
      status: 'stopped',
      lastError: null,
      failedEvent: null,
      pause: null,
      createdAt: at,
      updatedAt: at,
    };
    this.consumers.set(name, created);
    return ok({ ok: true, created: true, state: this.state(created) });
  }

  acquire(name: string, owner: string, ttlMs: number): Promise<AcquireResult> {
    const row = this.consumers.get(name);
    if (!row) return ok({ ok: false, reason: 'not_found' });
    if (this.leaseLive(row))
      return ok({ ok: false, reason: 'busy', owner: row.owner, leaseExpiresAt: row.leaseExpiresAt });
    row.epoch += 1;
    row.owner = owner;
    row.leaseExpiresAt = new Date(this.now() + ttlMs).toISOString();
    row.status = 'running';
    row.lastError = null;
    row.failedEvent = null;
    row.updatedAt = this.iso();
    return ok({ ok: true, epoch: row.epoch, position: row.position, leaseExpiresAt: row.leaseExpiresAt });
  }

  renew(name: string, epoch: number, ttlMs: number): Promise<RenewResult> {
    const row = this.owned(name, epoch);
    if ('reason' in row) return ok(row);
    row.leaseExpiresAt = new Date(this.now() + ttlMs).toISOString();
    return ok({ ok: true, leaseExpiresAt: row.leaseExpiresAt, pause: clone(row.pause) });
  }

  release(name: string, epoch: number, failure?: FailureInfo): Promise<WriteResult> {
    const row = this.owned(name, epoch);
    if ('reason' in row) return ok(row);
    row.owner = null;
    row.leaseExpiresAt = null;
    row.status = failure ? 'failed' : 'stopped';
    row.lastError = failure ? clone(failure.error) : null;
    row.failedEvent = failure?.event ? clone(failure.event) : null;
    row.updatedAt = this.iso();
    return ok({ ok: true });
  }

  ack(name: string, epoch: number, position: number, resolveIds: readonly string[]): Promise<AckResult> {
    const row = this.owned(name, epoch);
    if ('reason' in row) return ok(row);
    if (position > row.position) {
      row.position = position;
      row.updatedAt = this.iso();
    }
    let resolved = 0;
    const letters = this.letters.get(name);
    for (const id of resolveIds) {
      const l = letters?.get(id);
      if (l && l.status === 'retrying') {
        l.status = 'resolved';
        resolved++;
      }
    }
    return ok({ ok: true, position: row.position, resolved });
  }

  park(name: string, epoch: number, request: ParkRequest): Promise<ParkResult> {
    const row = this.owned(name, epoch);
    if ('reason' in row) return ok(row);
    const letters = this.letters.get(name) ?? new Map<string, DeadLetterRecord>();
    this.letters.set(name, letters);
    const { event } = request;
    const sameStream = [...letters.values()].filter(
      (l) => l.event.stream === event.stream && isActive(l.status),
    );
    const earlier = sameStream.filter((l) => l.event.position < event.position && l.event.id !== event.id);
    earlier.sort((a, b) => a.event.position - b.event.position);
    const existing = letters.get(event.id);
    const behind = earlier[0]?.event.id ?? null;
    const redrives = existing?.redrives ?? 0;
    const redriveAt =
      request.redrive && redrives < request.redrive.max
        ? new Date(this.now() + redriveDelayMs(request.redrive, redrives)).toISOString()
        : null;
    for (const l of sameStream) {
      if (l.event.position <= event.position) continue;
      if (l.status === 'retrying') l.status = 'parked';
      // Successors now wait behind this event when it heads the stream's dead letters.
      if (behind === null) l.behind = event.id;
    }
    let record: DeadLetterRecord;
    if (existing) {
      existing.status = 'parked';
      existing.reason = request.reason;
      existing.error = clone(request.error);
      existing.attempts = request.attempts;
      existing.behind = behind;
      existing.redriveAt = redriveAt;
      existing.skippedAt = null;
      existing.skippedBy = null;
      record = existing;
    } else {
      record = { ...this.newRecord(name, event, request, 'parked', behind), redriveAt };
      letters.set(event.id, record);
    }
    return ok({ ok: true, record: clone(record) });
  }

  parkBehind(name: string, epoch: number, events: readonly RecordedEvent[]): Promise<ParkBehindResult> {
    const row = this.owned(name, epoch);
    if ('reason' in row) return ok(row);
    const letters = this.letters.get(name) ?? new Map<string, DeadLetterRecord>();
    this.letters.set(name, letters);
    const released = new Set<string>();
    const parked = events.map((event) => {
      if (released.has(event.stream)) return false;
      const existing = letters.get(event.id);
      if (existing && isActive(existing.status)) return true;
      const sameStream = [...letters.values()].filter(
        (l) => l.event.stream === event.stream && isActive(l.status),
      );
      const first = sameStream
        .filter((l) => l.event.position < event.position)
        .sort((a, b) => a.event.position - b.event.position)[0];
      if (!first) {
        released.add(event.stream);
        return false;
      }
      const status: DeadLetterStatus = sameStream.some((l) => l.status === 'retrying')
        ? 'retrying'
        : 'parked';
      const request = { event, reason: behindReason(event.stream), error: null, attempts: 0, redrive: null };
      letters.set(event.id, this.newRecord(name, event, request, status, first.event.id));
      return true;
    });
    return ok({ ok: true, parked });
  }

  setPause(name: string, pause: NewPause | null, onlyFrom?: PauseReason | null): Promise<PauseResult> {
    const row = this.consumers.get(name);
    if (!row) return ok({ ok: false, reason: 'not_found' });
    const current = row.pause?.reason ?? null;
    const applies = (onlyFrom === undefined || onlyFrom === current) && (pause?.reason ?? null) !== current;
    if (applies) {
      row.pause = pause && { reason: pause.reason, since: this.iso(), by: pause.by };
      row.updatedAt = this.iso();
    }
    return ok({ ok: true, changed: applies, pause: clone(row.pause) });
  }

  get(name: string): Promise<ConsumerRecord | null> {
    const row = this.consumers.get(name);
    return ok(row ? this.state(row) : null);
  }

  list(): Promise<ConsumerRecord[]> {
    return ok(
      [...this.consumers.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map((r) => this.state(r)),
    );
  }

  reset(name: string, position: number): Promise<AdminResult> {
    const row = this.consumers.get(name);
    if (!row) return ok({ ok: false, reason: 'not_found' });
    if (this.leaseLive(row))
      return ok({ ok: false, reason: 'busy', owner: row.owner, leaseExpiresAt: row.leaseExpiresAt });
    row.position = position;
    row.updatedAt = this.iso();
    return ok({ ok: true });
  }

  ledgerHorizon(name: string): Promise<number> {
    return ok(this.horizons.get(name) ?? 0);
  }

  setLedgerHorizon(name: string, position: number): Promise<void> {
    this.horizons.set(name, position);
    return ok(undefined);
  }

  delete(name: string): Promise<AdminResult> {
    const row = this.consumers.get(name);
    if (!row) return ok({ ok: false, reason: 'not_found' });
    if (this.leaseLive(row))
      return ok({ ok: false, reason: 'busy', owner: row.owner, leaseExpiresAt: row.leaseExpiresAt });
    this.consumers.delete(name);
    this.letters.delete(name);
    this.horizons.delete(name);
    return ok({ ok: true });
  }

  forceRelease(name: string): Promise<ForceReleaseResult> {
    const row = this.consumers.get(name);
    if (!row) return ok({ ok: false, reason: 'not_found' });
    if (row.owner === null) return ok({ ok: true });
    row.owner = null;
    row.leaseExpiresAt = null;
    row.epoch += 1;
    if (row.status === 'running') row.status = 'stopped';
    row.updatedAt = this.iso();
    return ok({ ok: true });
  }

  deadLetters(
    name: string,
    options: { all?: boolean; status?: DeadLetterStatus; stream?: string; limit?: number } = {},
  ): Promise<DeadLetterRecord[]> {
    let rows = [...(this.letters.get(name)?.values() ?? [])];
    if (options.status) rows = rows.filter((l) => l.status === options.status);
    else if (!options.all) rows = rows.filter((l) => isActive(l.status));
    if (options.stream !== undefined) rows = rows.filter((l) => l.event.stream === options.stream);
    rows.sort((a, b) => a.event.position - b.event.position);
    if (options.limit !== undefined) rows = rows.slice(0, options.limit);
    return ok(rows.map(clone));
  }

  retryingConsumers(names: readonly string[]): Promise<string[]> {
    return ok(
      names.filter((n) => [...(this.letters.get(n)?.values() ?? [])].some((l) => l.status === 'retrying')),
    );
  }

  blockedStreams(name: string): Promise<string[]> {
    const set = new Set<string>();
    for (const l of this.letters.get(name)?.values() ?? []) if (isActive(l.status)) set.add(l.event.stream);
    return ok([...set]);
  }

  deadLetterStreams(name: string, query: DeadLetterStreamQuery): Promise<string[]> {
    const set = new Set<string>();
    for (const l of this.letters.get(name)?.values() ?? []) {
      if (query.statuses === 'parked' ? l.status !== 'parked' : !isActive(l.status)) continue;
      if (query.after !== null && l.event.stream <= query.after) continue;
      if (query.error !== undefined && !errorMatches(l.error, query.error)) continue;
      set.add(l.event.stream);
    }
    return ok([...set].sort(byCodeUnits).slice(0, query.limit));
  }

  retry(name: string, selector: BackendSelector): Promise<number> {
    let n = 0;
    for (const l of this.selected(name, selector)) {
      if (l.status === 'parked') {
        l.status = 'retrying';
        n++;
      }
    }
    return ok(n);
  }

  skip(name: string, selector: BackendSelector, by: string): Promise<number> {
    const at = this.iso();
    let n = 0;
    for (const l of this.selected(name, selector)) {
      if (isActive(l.status)) {
        l.status = 'skipped';
        l.skippedBy = by;
        l.skippedAt = at;
        n++;
      }
    }
    return ok(n);
  }

  redriveDue(name: string): Promise<number> {
    const letters = [...(this.letters.get(name)?.values() ?? [])];
    const now = this.now();
    const due = new Set<string>();
    for (const l of letters) {
      if (l.status !== 'parked' || l.redriveAt === null || Date.parse(l.redriveAt) > now) continue;
      l.redrives++;
      l.redriveAt = null;
      due.add(l.event.stream);
    }
    let n = 0;
    for (const l of letters) {
      if (l.status === 'parked' && due.has(l.event.stream)) {
        l.status = 'retrying';
        n++;
      }
    }
    return ok(n);
  }

  private selected(name: string, selector: BackendSelector): DeadLetterRecord[] {
    const letters = this.letters.get(name);
    if (!letters) return [];
    if ('streams' in selector) {
      const streams = new Set(selector.streams);
      return [...letters.values()].filter((l) => streams.has(l.event.stream));
    }
    const stream = 'stream' in selector ? selector.stream : letters.get(selector.id)?.event.stream;
    if (stream === undefined) return [];
    return [...letters.values()].filter((l) => l.event.stream === stream);
  }

  private newRecord(
    name: string,
    event: RecordedEvent,
    request: ParkRequest,
    status: DeadLetterStatus,
    behind: string | null,
  ): DeadLetterRecord {
    return {
      consumer: name,
      event: clone(event),
      reason: request.reason,
      error: clone(request.error),
      attempts: request.attempts,
      status,
      behind,
      redrives: 0,
      redriveAt: null,
      parkedAt: this.iso(),
      skippedBy: null,
      skippedAt: null,
    };
  }

  private owned(name: string, epoch: number): Row | Fenced {
    const row = this.consumers.get(name);
    if (!row) return { ok: false, reason: 'fenced', currentEpoch: null };
    if (row.epoch !== epoch) return { ok: false, reason: 'fenced', currentEpoch: row.epoch };
    return row;
  }

  private leaseLive(row: Row): boolean {
    return row.owner !== null && row.leaseExpiresAt !== null && Date.parse(row.leaseExpiresAt) > this.now();
  }

  private state(row: Row): ConsumerRecord {
    let parked = 0;
    for (const l of this.letters.get(row.name)?.values() ?? []) if (isActive(l.status)) parked++;
    return { ...clone(row), parked };
  }

  private iso(): string {
    return new Date(this.now()).toISOString();
  }
}

/** Stream-name order, by UTF-16 code units. */
function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The bulk operations' error match: code or name equal, or the message containing the text. */
export function errorMatches(error: DeadLetterRecord['error'], text: string): boolean {
  if (!error) return false;
  return error.code === text || error.name === text || error.message.includes(text);
}

function ok<T>(value: T): Promise<T> {
  return Promise.resolve(value);
}

function clone<T>(value: T): T {
  return structuredClone(value);
}
