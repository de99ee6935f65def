import type { RecordedEvent } from '../core/event.js';
import { ClosedError, FencedError, InvalidInputError, isIdemError } from '../core/errors.js';
import type {
  ConsumerPause,
  FailureInfo,
  ParkInfo,
  ParkResult,
  Subscription,
  SubscriptionMessage,
} from '../core/subscription.js';
import { validatePosition } from '../core/validation.js';
import { validateFailureInfo, validateParkInfo } from '../core/parkInfo.js';
import { MAX_PAGE_BYTES } from '../core/limits.js';
import { countWithinBytes } from '../core/pageBytes.js';
import { ReadAhead } from './readAhead.js';
import type { Fenced, SubscriptionStateBackend } from './stateBackend.js';
import type { ResolvedSubscribeOptions } from './subscribeOptions.js';
import { scannedPage, type ScannedPage, type SubscriptionSource } from './subscriptionSource.js';
import { AlignedInterval } from './heartbeat.js';
import type { RetryingProbe } from './retryingProbe.js';
import type { SharedTail } from './sharedTail.js';
import { Wakeup } from './wakeup.js';

/** The longest delay `setInterval` takes; a longer one fires every millisecond instead. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The UTF-8 bytes of an event's data and metadata JSON, as a store's `maxEventBytes` measures them. */
const eventBytes = (e: RecordedEvent): number =>
  Buffer.byteLength(JSON.stringify(e.data)) + Buffer.byteLength(JSON.stringify(e.metadata));

const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * The most positions one read looks at, matching or not: a read with a filter that matches little
 * stays short (on SQLite it runs on the event loop), and the read position moves on page by page.
 */
export const MAX_SCAN = 10_000;
/**
 * How often at most the stored cursor is moved past events the filter leaves out (see `settleCursor`),
 * unless it falls `CURSOR_ADVANCE_POSITIONS` behind. Lag counts matching events, so a cursor behind
 * by left-out events alone still shows lag 0 while it is within the positions lag counts.
 */
const CURSOR_ADVANCE_MS = 10_000;
const CURSOR_ADVANCE_POSITIONS = 5_000;
/**
 * With no stream blocked here, retrying dead letters are looked for once per this many polling
 * intervals (see `nextRedelivery`): with many idle subscriptions the check would otherwise be as
 * many queries as their reads.
 */
const REDELIVERY_CHECK_POLLS = 10;
/**
 * How often at most an owner with blocked streams looks for dead letters whose automatic redrive is
 * due (a write: on SQLite it takes the write lock, so not at every poll).
 */
const REDRIVE_CHECK_MS = 1_000;

/** What a subscription needs from the service that opened it. */
export interface SubscriptionDeps {
  source: SubscriptionSource;
  backend: SubscriptionStateBackend;
  /** How often to look for appends by other processes and dead letters being retried. */
  pollIntervalMs: number;
  /** Called once when the subscription ends (closed, failed or fenced). */
  onEnd: (sub: DurableSubscription) => void;
  /** The keys of the log's tail, shared by the service's idle subscriptions (sources with `scanKeys`). */
  tail: SharedTail | null;
  /** The safety-net check for retrying dead letters, shared by the service's subscriptions (backends with `retryingConsumers`). */
  retrying: RetryingProbe | null;
  /** Told when the subscription starts and stops waiting for appends (sources with `hearOthers`). */
  hearing?: { begin(): void; end(): void };
}

/**
 * One owner's view of a consumer, from a successful lease acquisition until close, fail or the loss of
 * the lease. Delivery: first every `retrying` dead letter not yet redelivered here (flagged
 * `redelivery`), then the log after `readPos` in pages; events of a stream with an active dead letter
 * are parked behind it instead of delivered. Reads stop while `maxInFlight` events are unacknowledged.
 */
export class DurableSubscription implements Subscription {
  readonly consumer: string;
  readonly epoch: number;
  readonly startPosition: number;
  /** Wakes the delivery loop: appends, acks, retries, close, lease loss. */
  readonly wake = new Wakeup();

  private cursor: number;
  private readPos: number;
  /** Highest position delivered in a normal (not redelivery) batch. */
  private highestDelivered: number;
  /** Position of the last `caught_up` message: the client may acknowledge up to it. */
  private caughtUpAt = 0;
  /** When the stored cursor may next be moved past events the filter leaves out. */
  private nextCursorAdvance = 0;
  /** A position up to which every event was acknowledged, parked or left out by the filter. */
  private settled = 0;
  /** Highest position the engine parked by itself (behind a dead letter), never delivered. */
  private autoParkedHigh = 0;
  /** Delivered in normal batches and not yet acknowledged, in position order. */
  private outstanding: RecordedEvent[] = [];
  /** Redelivered dead letters not yet resolved by an ack, by event id. */
  private readonly redelivered = new Map<string, RecordedEvent>();
  private redeliveredHigh = 0;
  /** Pages read ahead (sources whose reads wait on I/O); empty otherwise. */
  private readonly ahead: ReadAhead;
  /** When to look for retrying dead letters even with no stream blocked here (see `nextRedelivery`). */
  private nextRedeliveryCheck = 0;
  /** When to look next for dead letters whose automatic redrive is due. */
  private nextRedriveCheck = 0;
  /** Streams with an active dead letter as far as this owner knows (only it adds; admin may remove). */
  private readonly blocked: Set<string>;
  /** Local estimate of the lease's end; delivery renews first once it has passed. */
  private leaseDeadline: number;
  private renewalSuspended = false;
  /** The consumer's stored pause as last seen (at the start, by a renewal, or told by the service). */
  private stored: ConsumerPause | null;
  /** Whether the last `paused` message said paused: one message per change. */
  private announcedPause = false;
  private closed = false;
  /**
   * The last read that looked at new positions reached the head and found only events the filter
   * leaves out, or a subscription with a filter has delivered nothing yet (one that resumes at a
   * quiet head): the next reads ask the shared tail first, and the polls between appends fall on
   * the polling interval's ticks. An unfiltered subscription gains nothing from the tail.
   */
  private idle: boolean;
  /** Waiting for the next polling tick after a read that found only left-out events: appends do not wake it. */
  private resting = false;
  private lost: FencedError | null = null;
  private readonly heartbeat: AlignedInterval;
  private iterator: AsyncGenerator<SubscriptionMessage> | null = null;
  private chain: Promise<unknown> = Promise.resolve();
  private readonly removeAbort: (() => void) | undefined;

  constructor(
    private readonly deps: SubscriptionDeps,
    private readonly options: ResolvedSubscribeOptions,
    epoch: number,
    position: number,
    blockedStreams: readonly string[],
    pause: ConsumerPause | null,
  ) {
    this.stored = pause;
    this.idle = Object.keys(options.filter).length > 0;
    this.consumer = options.consumer;
    this.epoch = epoch;
    this.startPosition = position;
    this.cursor = position;
    this.readPos = position;
    this.highestDelivered = position;
    this.blocked = new Set(blockedStreams);
    this.ahead = new ReadAhead(
      (after, limit) => this.fetchPage(after, limit),
      options,
      () => (this.active ? this.outstanding.length + this.redelivered.size : null),
    );
    this.leaseDeadline = Date.now() + options.leaseTtlMs;
    this.heartbeat = new AlignedInterval(
      () => void this.renew(),
      Math.min(MAX_TIMER_MS, Math.max(50, Math.floor(options.leaseTtlMs / 3))),
    );
    const signal = options.signal;
    if (signal) {
      const onAbort = (): void => void this.close().catch(() => undefined);
      signal.addEventListener('abort', onAbort, { once: true });
      this.removeAbort = () => signal.removeEventListener('abort', onAbort);
    }
  }

  [Symbol.asyncIterator](): AsyncGenerator<SubscriptionMessage> {
    this.iterator ??= this.run();
    return this.iterator;
  }

  /** True until closed, failed or fenced. */
  get active(): boolean {
    return !this.closed && this.lost === null;
  }

  async ack(position: number): Promise<void> {
    validatePosition(position, 'position');
    this.assertUsable();
    const limit = Math.max(this.highestDelivered, this.redeliveredHigh, this.caughtUpAt);
    if (position > limit) {
      throw new InvalidInputError(
        'position',
        `must not exceed the last delivered or caught-up position (${limit})`,
      );
    }
    await this.locked(async () => {
      this.assertUsable();
      const resolve = [...this.redelivered.values()].filter((e) => e.position <= position).map((e) => e.id);
      let target = Math.min(position, this.highestDelivered);
      // Events the engine parked by itself after the last delivered one are recorded, and those up to
      // the caught-up position that were not delivered are left out by the filter: ack past them.
      if (position >= this.highestDelivered) {
        target = Math.max(target, this.autoParkedHigh, Math.min(position, this.caughtUpAt));
      }
      if (target <= this.cursor && resolve.length === 0) return;
      const result = await this.deps.backend.ack(this.consumer, this.epoch, target, resolve);
      if (!result.ok) throw this.lose(result);
      this.cursor = result.position;
      this.outstanding = this.outstanding.filter((e) => e.position > this.cursor);
      for (const id of resolve) this.redelivered.delete(id);
      this.wake.notify();
    });
  }

  async park(position: number, info: ParkInfo): Promise<ParkResult> {
    validatePosition(position, 'position');
    const parkInfo = validateParkInfo(info);
    this.assertUsable();
    return this.locked(async () => {
      this.assertUsable();
      const again = [...this.redelivered.values()].find((e) => e.position === position);
      const event = again ?? this.outstanding.find((e) => e.position === position);
      if (!event)
        throw new InvalidInputError('position', 'must be the position of a delivered, unacknowledged event');
      const result = await this.deps.backend.park(this.consumer, this.epoch, {
        event,
        reason: parkInfo.reason,
        error: parkInfo.error ?? null,
        attempts: parkInfo.attempts ?? 1,
        redrive: parkInfo.redrive ?? null,
      });
      if (!result.ok) throw this.lose(result);
      this.blocked.add(event.stream);
      if (again) {
        // The backend returned this entry and its stream's later retrying entries to `parked`.
        for (const [id, e] of this.redelivered) {
          if (e.stream === event.stream && e.position >= position) this.redelivered.delete(id);
        }
      }
      // Later events of the stream already delivered in this or an earlier batch wait behind it too
      // (unless an operator has released the stream meanwhile: then none of the rest is parked).
      const later = this.outstanding.filter((e) => e.stream === event.stream && e.position > position);
      let parkedThrough = position;
      for (const e of await this.parkBehind(later)) parkedThrough = Math.max(parkedThrough, e.position);
      this.wake.notify();
      return { parkedThrough };
    });
  }

  async fail(info: FailureInfo): Promise<void> {
    const failure = validateFailureInfo(info);
    this.assertUsable();
    await this.locked(async () => {
      this.assertUsable();
      const result = await this.deps.backend.release(this.consumer, this.epoch, failure);
      if (!result.ok) throw this.lose(result);
      this.end();
    });
  }

  async outage(active: boolean): Promise<void> {
    this.assertUsable();
    await this.deps.backend.setPause(
      this.consumer,
      active ? { reason: 'outage', by: null } : null,
      active ? null : 'outage',
    );
  }

  /** The release in progress: a second `close()` waits for it instead of returning before it is done. */
  private closing: Promise<void> | null = null;

  close(): Promise<void> {
    if (this.closing) return this.closing;
    if (!this.active) return Promise.resolve();
    this.closing = this.release();
    return this.closing;
  }

  private async release(): Promise<void> {
    this.closed = true;
    this.stopTimers();
    this.wake.notify();
    try {
      await this.locked(async () => {
        // The next owner starts after the events left out by the filter too.
        await this.storeSettled().catch(() => undefined);
        const result = await this.deps.backend.release(this.consumer, this.epoch);
        // Fenced here means another owner took over already: nothing left to release.
        void result;
      });
    } catch (err) {
      // The store was closed under us: the lease lapses by itself.
      if (!isIdemError(err, 'closed')) throw err;
    } finally {
      this.deps.onEnd(this);
    }
  }

  /** Something was appended in this process: read on, unless resting until the next polling tick. */
  appended(): void {
    if (!this.resting) this.wake.notify();
  }

  /** The consumer was paused or resumed (by an operator in this process, or as seen by a renewal). */
  pauseChanged(pause: ConsumerPause | null): void {
    this.stored = pause;
    this.wake.notify();
  }

  /** Internal, for fault tests: stop renewing the lease, as a paused or partitioned owner would. */
  suspendLeaseRenewal(): void {
    this.renewalSuspended = true;
    this.heartbeat.stop();
  }

  private async *run(): AsyncGenerator<SubscriptionMessage> {
    const { batchSize, maxInFlight } = this.options;
    let caughtUp = false;
    try {
      for (;;) {
        if (this.stopped()) return;
        const generation = this.wake.generation;
        // An operator's pause holds delivery (what is in flight may still be acked or parked); an
        // outage pause is the runtime's own, which holds back by itself.
        const held = this.stored?.reason === 'operator' ? this.stored : null;
        if ((held !== null) !== this.announcedPause) {
          this.announcedPause = held !== null;
          yield { kind: 'paused', pause: held };
          continue;
        }
        if (held) {
          await this.wake.wait(generation, this.deps.pollIntervalMs);
          continue;
        }
        // The first page read ahead is about to be delivered: its share of the room is free to use
        // (asked first: stale pages are dropped, and their room with them).
        const next = this.ahead.nextLimit(this.readPos);
        const room = maxInFlight - this.outstanding.length - this.redelivered.size - this.ahead.room() + next;
        if (room > 0) {
          const limit = Math.min(room, batchSize);
          if (this.blocked.size > 0 || Date.now() >= this.nextRedeliveryCheck) {
            const again = await this.nextRedelivery(limit);
            if (this.stopped()) return;
            if (again.length > 0) {
              yield { kind: 'events', events: again, redelivery: true };
              continue;
            }
          }
          const from = this.readPos;
          const page = await this.readPage(limit);
          if (this.stopped()) return;
          // The read stopped short of the head it saw (a full page, or as many positions as one read may look at).
          const more = page.through < page.head;
          if (page.events.length > 0) {
            // An owner that missed its heartbeats (a long pause) checks the lease before delivering.
            if (Date.now() >= this.leaseDeadline) await this.renew();
            if (this.stopped()) return;
          }
          // Past the events the filter leaves out too, so that they are not read again.
          this.readPos = page.through;
          if (page.events.length > 0 || more) this.idle = false;
          // Only events the filter leaves out, up to the head: the next reads ask the shared tail first.
          else if (this.readPos > from) this.idle = true;
          const deliver = page.events.length > 0 ? await this.locked(() => this.sortOut(page.events)) : [];
          // The page now counts as outstanding (or parked), no longer as read ahead.
          this.ahead.release();
          if (more) {
            // A synchronous source (SQLite) never waits on I/O: without this, a catch-up would run
            // to the head in one turn of the event loop, starving timers (lease heartbeats), I/O
            // and V8's garbage-collection tasks. Live pages (read through the head) are delivered at once.
            await yieldToEventLoop();
            if (this.stopped()) return;
            if (this.deps.source.readAhead) this.ahead.start(this.readPos);
          }
          if (deliver.length > 0) yield { kind: 'events', events: deliver, redelivery: false };
          if (page.events.length > 0 || more) continue;
          await this.settleCursor();
          if (!caughtUp) {
            caughtUp = true;
            this.caughtUpAt = this.readPos;
            yield { kind: 'caught_up', position: this.readPos };
            continue;
          }
          // Only events the filter leaves out arrived: look again at the next tick of the polling
          // interval, not at every append, so that idle narrow subscriptions in a busy log cost a
          // bounded number of reads (at the price of up to that much latency on their next matching
          // event). The ticks are the same for every subscription, so their reads of the tail are one.
          if (this.readPos > from) {
            await this.rest();
            continue;
          }
        } else if (!caughtUp && (await this.deps.source.headPosition()) <= this.readPos) {
          // Everything up to the head is delivered though not yet acknowledged: say so now.
          caughtUp = true;
          this.caughtUpAt = this.readPos;
          yield { kind: 'caught_up', position: this.readPos };
          continue;
        }
        // Waiting for appends (or acks): other processes' commits are wanted now. An idle
        // subscription polls on the interval's ticks, as a resting one does, so that the idle
        // subscriptions of a quiet log share one read of the tail per tick.
        this.deps.hearing?.begin();
        try {
          const poll = this.deps.pollIntervalMs;
          await this.wake.wait(generation, this.idle ? poll - (Date.now() % poll) : poll);
        } finally {
          this.deps.hearing?.end();
        }
      }
    } finally {
      // Leaving the loop early (break, return, an error from the store) ends the ownership.
      if (this.active) await this.close();
    }
  }

  /**
   * The next page of the log after `readPos` (at most `limit` events): the first page read ahead, if
   * any, else a page read now.
   */
  private async readPage(limit: number): Promise<ScannedPage> {
    return (await this.ahead.take(this.readPos, limit)) ?? this.fetchPage(this.readPos, limit);
  }

  /**
   * One page of the log, looking at no more than `MAX_SCAN` positions where the source can (one
   * query); else the head, then the events collected from `readPage` or `readAll`. Either way the
   * page ends early at `MAX_PAGE_BYTES`, so one delivery (one WebSocket frame) stays bounded.
   */
  private async fetchPage(from: number, limit: number): Promise<ScannedPage> {
    const { source, tail } = this.deps;
    const { filter } = this.options;
    let after = from;
    if (this.idle && tail) {
      const look = await tail.look(after, filter, MAX_SCAN);
      // Nothing for this filter up to where the tail looked; else read from its first match.
      if (look?.first === null) return scannedPage([], limit, look.through, look.head);
      if (look) after = look.first - 1;
    }
    if (source.scanPage) return source.scanPage(after, filter, limit, MAX_SCAN, MAX_PAGE_BYTES);
    // Read first: every position up to this head is committed, so an unfilled page read after it
    // holds every matching event up to it.
    const head = await source.headPosition();
    let events: RecordedEvent[];
    if (source.readPage) events = await source.readPage(after, filter, limit);
    else {
      events = [];
      for await (const e of source.readAll({ after, filter, limit })) events.push(e);
    }
    const keep = countWithinBytes(events.length, (i) => eventBytes(events[i]!), MAX_PAGE_BYTES);
    const cut = keep < events.length;
    return scannedPage(cut ? events.slice(0, keep) : events, limit, Math.max(after, head), head, cut);
  }

  /**
   * Moves the stored cursor to the read position when nothing delivered awaits an ack (the events
   * between were left out by the filter or parked), so that a narrow consumer shows no lag and a new
   * owner does not read them again. At most once per `CURSOR_ADVANCE_MS`: an idle subscription in a
   * busy log would otherwise write at every append.
   */
  private async settleCursor(): Promise<void> {
    if (this.outstanding.length > 0) return;
    // Every event up to here is acknowledged, parked, or left out by the filter.
    this.settled = this.readPos;
    const now = Date.now();
    if (now < this.nextCursorAdvance && this.settled - this.cursor < CURSOR_ADVANCE_POSITIONS) return;
    if (this.settled <= this.cursor) return;
    this.nextCursorAdvance = now + CURSOR_ADVANCE_MS;
    await this.locked(() => this.storeSettled());
  }

  /** Stores `settled` as the cursor while nothing delivered awaits an ack. */
  private async storeSettled(): Promise<void> {
    if (this.outstanding.length > 0 || this.settled <= this.cursor || this.lost) return;
    const result = await this.deps.backend.ack(this.consumer, this.epoch, this.settled, []);
    if (!result.ok) throw this.lose(result);
    this.cursor = result.position;
    this.highestDelivered = Math.max(this.highestDelivered, this.cursor);
  }

  /**
   * Retrying dead letters not yet redelivered here, in position order. Only streams with an active
   * dead letter can have retrying ones, and only the owner adds such streams (to `blocked`, which
   * starts with the backend's list), so with none blocked the query runs only once per polling
   * interval (a safety net), not once per page.
   */
  private async nextRedelivery(limit: number): Promise<RecordedEvent[]> {
    const now = Date.now();
    // At the same ticks for every subscription of the service, so that one probe answers them all.
    const period = REDELIVERY_CHECK_POLLS * this.deps.pollIntervalMs;
    this.nextRedeliveryCheck = (Math.floor(now / period) + 1) * period;
    if (this.blocked.size > 0 && now >= this.nextRedriveCheck) {
      this.nextRedriveCheck = now + Math.max(REDRIVE_CHECK_MS, this.deps.pollIntervalMs);
      await this.deps.backend.redriveDue(this.consumer);
    }
    // With no blocked stream this is the safety net alone: ask the shared probe first.
    if (this.blocked.size === 0 && this.deps.retrying && !(await this.deps.retrying.mayHave(this.consumer)))
      return [];
    const rows = await this.deps.backend.deadLetters(this.consumer, {
      status: 'retrying',
      limit: this.redelivered.size + limit,
    });
    const events = rows
      .filter((r) => !this.redelivered.has(r.event.id))
      .slice(0, limit)
      .map((r) => r.event);
    this.deps.source.upcast?.(events);
    for (const e of events) {
      this.redelivered.set(e.id, e);
      this.redeliveredHigh = Math.max(this.redeliveredHigh, e.position);
      this.blocked.add(e.stream);
    }
    return events;
  }

  /** Parks the read events of blocked streams and returns the rest, now counted as delivered. */
  private async sortOut(read: RecordedEvent[]): Promise<RecordedEvent[]> {
    let deliver = read;
    if (this.blocked.size > 0) {
      const parked = await this.parkBehind(read.filter((e) => this.blocked.has(e.stream)));
      if (parked.size > 0) deliver = read.filter((e) => !parked.has(e));
    }
    if (deliver.length > 0) {
      this.outstanding.push(...deliver);
      this.highestDelivered = deliver[deliver.length - 1]!.position;
    } else if (this.outstanding.length === 0 && this.autoParkedHigh > this.cursor) {
      // Nothing delivered is waiting for an ack: move the cursor past what was parked.
      const result = await this.deps.backend.ack(this.consumer, this.epoch, this.autoParkedHigh, []);
      if (!result.ok) throw this.lose(result);
      this.cursor = result.position;
      this.highestDelivered = Math.max(this.highestDelivered, this.cursor);
    }
    return deliver;
  }

  /**
   * Parks `events` behind their streams' dead letters (one backend call) and returns those parked. A
   * stream found no longer blocked (retried or skipped meanwhile) is unblocked: its events are not.
   */
  private async parkBehind(events: readonly RecordedEvent[]): Promise<Set<RecordedEvent>> {
    const parked = new Set<RecordedEvent>();
    if (events.length === 0) return parked;
    const result = await this.deps.backend.parkBehind(this.consumer, this.epoch, events);
    if (!result.ok) throw this.lose(result);
    events.forEach((e, i) => {
      if (!result.parked[i]) {
        this.blocked.delete(e.stream);
        return;
      }
      parked.add(e);
      this.autoParkedHigh = Math.max(this.autoParkedHigh, e.position);
    });
    return parked;
  }

  private async renew(): Promise<void> {
    if (!this.active || this.renewalSuspended) return;
    try {
      const started = Date.now();
      const result = await this.deps.backend.renew(this.consumer, this.epoch, this.options.leaseTtlMs);
      if (result.ok) {
        this.leaseDeadline = started + this.options.leaseTtlMs;
        if ((result.pause?.reason ?? null) !== (this.stored?.reason ?? null)) this.pauseChanged(result.pause);
      } else if (this.active) this.lose(result);
    } catch {
      // A failed renewal is retried on the next beat; if the lease lapses meanwhile and another
      // owner takes over, the epoch check fences this one.
    }
  }

  private lose(fenced: Fenced): FencedError {
    if (!this.lost) {
      this.lost = new FencedError(this.consumer, this.epoch, fenced.currentEpoch);
      this.stopTimers();
      this.wake.notify();
      this.deps.onEnd(this);
    }
    return this.lost;
  }

  private end(): void {
    if (this.closed) return;
    this.closed = true;
    this.stopTimers();
    this.wake.notify();
    this.deps.onEnd(this);
  }

  private stopTimers(): void {
    this.heartbeat.stop();
    this.removeAbort?.();
  }

  /** Throws the fencing error once the lease is lost; true once closed. */
  private stopped(): boolean {
    if (this.lost) throw this.lost;
    return this.closed;
  }

  private assertUsable(): void {
    if (this.lost) throw this.lost;
    if (this.closed) throw new ClosedError(`subscription of consumer "${this.consumer}"`);
  }

  /**
   * Waits after a read that found only events the filter leaves out; appends do not wake it. With a
   * shared tail and no stream blocked here it rests in the tail: woken when the tail shows an event
   * for the filter (or cannot tell), for the next check for retrying dead letters, or by what wakes
   * the loop (acks, close, a pause, the lease's loss); meanwhile the read position follows the
   * positions the tail looked at, and the stored cursor follows it as `settleCursor` moves it.
   * Otherwise it waits for the next tick of the polling interval.
   */
  private async rest(): Promise<void> {
    const tail = this.deps.tail;
    if (!tail || this.blocked.size > 0) return this.restUntilNextPoll();
    const generation = this.wake.generation;
    const poll = this.deps.pollIntervalMs;
    this.resting = true;
    const resting = tail.rest(this.readPos, this.options.filter, MAX_SCAN, poll, (through) =>
      this.restedThrough(through),
    );
    try {
      const now = Date.now();
      await Promise.race([
        resting.done,
        this.wake.wait(generation, Math.max(poll - (now % poll), this.nextRedeliveryCheck - now)),
      ]);
    } finally {
      resting.cancel();
      this.resting = false;
    }
  }

  /** The tail looked at the positions up to `through` for this resting subscription: none is for it. */
  private restedThrough(through: number): void {
    if (!this.resting || !this.active || through <= this.readPos) return;
    this.readPos = through;
    // A failed write of the cursor wakes the loop, whose own `settleCursor` meets the failure.
    this.settleCursor().catch(() => this.wake.notify());
  }

  /** Waits for the next multiple of the polling interval (or less if it ends); appends do not wake it. */
  private async restUntilNextPoll(): Promise<void> {
    const poll = this.deps.pollIntervalMs;
    this.resting = true;
    try {
      await this.pause(poll - (Date.now() % poll));
    } finally {
      this.resting = false;
    }
  }

  /** Waits `ms`, or less if the subscription ends meanwhile. */
  private async pause(ms: number): Promise<void> {
    const until = Date.now() + ms;
    for (let left = ms; left > 0 && this.active; left = until - Date.now()) {
      await this.wake.wait(this.wake.generation, left);
    }
  }

  /** Runs state changes one at a time, so acks, parks and the delivery loop never interleave. */
  private locked<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => undefined);
    return run;
  }
}
