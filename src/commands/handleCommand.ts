import { backoffDelay, sleep } from '../core/backoff.js';
import { InvalidInputError, isIdemError, type IdemError } from '../core/errors.js';
import type { NewEvent, RecordedEvent } from '../core/event.js';
import type { EventStore } from '../core/eventStore.js';
import { validateStreamName } from '../core/validation.js';
import { commandEventId } from './commandEventId.js';
import { foldStream, type Evolve, type Folded } from './foldStream.js';

/** A command refused by `decide`, with the reason the caller gets back. */
export interface Rejected<Reason> {
  rejected: Reason;
}

/** What `decide` returns: the new events (none is fine), or a rejection. */
export type Decision<Reason> = readonly NewEvent[] | Rejected<Reason>;

/** The write model of one kind of stream: how its state is folded, and how a command is decided on it. */
export interface Decider<State, Command, Reason = unknown> {
  /** The state of a stream without events. Shared by every call, so `evolve` must not change it. */
  initialState: State;
  evolve: Evolve<State>;
  /**
   * The events a command adds to the stream in `state`, or `rejectCommand(reason)`. Called again on the
   * newer state after a version conflict, so it decides from `state` alone and has no side effects.
   */
  decide: (command: Command, state: State) => Decision<Reason> | Promise<Decision<Reason>>;
}

export interface HandleCommandOptions {
  /**
   * How many times a command that met a version conflict (another writer appended to the stream
   * between the read and the append) is decided again on the newer state before the conflict is
   * returned. 0-1000. @default 3
   */
  retries?: number;
  /**
   * Makes the command idempotent: its events carry it as `metadata.commandId` and get ids derived from
   * it (`commandEventId`), so the same command handled twice appends once and the second call returns
   * the first one's result (`duplicate: true`). 1-256 characters.
   */
  commandId?: string;
}

/** What handling a command came to. Conflicts and rejections are values; errors are for the unexpected. */
export type CommandResult<State, Reason = unknown> =
  | {
      ok: true;
      /** The state right after the command's events. */
      state: State;
      /** The stream's version after the command's events. */
      version: number;
      /** The events the command appended, as recorded (none when `decide` returned none). */
      events: RecordedEvent[];
      /** True when the command (by `commandId`) had been handled before and nothing was appended now. */
      duplicate: boolean;
      /** How many times the stream was read and the command decided. */
      attempts: number;
    }
  | {
      ok: false;
      reason: 'rejected';
      rejection: Reason;
      /** The state the command was decided on. */
      state: State;
      version: number;
      attempts: number;
    }
  | {
      ok: false;
      reason: 'conflict';
      /** The last `wrong_expected_version` error; `details.actual` is the stream's version. */
      error: IdemError;
      /** The state of the last decision. */
      state: State;
      version: number;
      attempts: number;
    };

/** The most `retries` a caller may ask for. */
export const MAX_COMMAND_RETRIES = 1000;
const MAX_COMMAND_ID_LENGTH = 256;
/** The first retry waits up to this long (times the jitter), doubling per retry up to the cap. */
const RETRY_INITIAL_MS = 2;
const RETRY_MAX_MS = 500;

/** The value `decide` returns to refuse a command; the caller receives `reason` as `rejection`. */
export function rejectCommand<Reason>(reason: Reason): Rejected<Reason> {
  return { rejected: reason };
}

/**
 * Handles one command on one stream, the write side's loop: read the stream and fold it with
 * `evolve`, `decide` the new events, append them with the version read as `expectedVersion`. When
 * another writer appended in between, the store refuses with `wrong_expected_version`; the newer
 * events are then folded in and the command decided again, up to `retries` times, each after a short
 * random wait so that writers racing on one stream spread out. Then the conflict is returned.
 *
 * Works on any `EventStore`: memory, SQLite, PostgreSQL and the remote client.
 */
export async function handleCommand<State, Command, Reason = unknown>(
  store: EventStore,
  stream: string,
  decider: Decider<State, Command, Reason>,
  command: Command,
  options: HandleCommandOptions = {},
): Promise<CommandResult<State, Reason>> {
  validateStreamName(stream);
  if (typeof decider?.evolve !== 'function') throw new InvalidInputError('evolve', 'must be a function');
  if (typeof decider.decide !== 'function') throw new InvalidInputError('decide', 'must be a function');
  const retries = validateRetries(options.retries);
  const earlier = options.commandId === undefined ? null : new EarlierResult<State>(options.commandId);
  const visit = earlier ? (e: RecordedEvent, state: State) => earlier.visit(e, state) : undefined;
  let folded: Folded<State> = { state: decider.initialState, version: 0 };
  for (let attempt = 1; ; attempt++) {
    folded = await foldStream(store, stream, decider.evolve, folded, {}, visit);
    if (earlier?.found) return earlier.result(attempt);
    const decision = await decider.decide(command, folded.state);
    if (isRejected(decision)) {
      return { ok: false, reason: 'rejected', rejection: decision.rejected, ...folded, attempts: attempt };
    }
    const decided: unknown = decision;
    if (!Array.isArray(decided)) {
      throw new InvalidInputError('decide', 'must return an array of events or rejectCommand(reason)');
    }
    if (decision.length === 0)
      return { ok: true, ...folded, events: [], duplicate: false, attempts: attempt };
    const events = earlier ? earlier.stamp(decision) : [...decision];
    try {
      const appended = await store.append(stream, events, { expectedVersion: folded.version });
      return await appendedResult(store, stream, decider.evolve, folded, appended, attempt);
    } catch (err) {
      if (isIdemError(err, 'wrong_expected_version')) {
        if (attempt > retries)
          return { ok: false, reason: 'conflict', error: err, ...folded, attempts: attempt };
        await sleep(backoffDelay(attempt, RETRY_INITIAL_MS, RETRY_MAX_MS));
        continue;
      }
      if (earlier && isIdemError(err, 'idempotency_conflict')) {
        // The same command was appended by another caller whose `decide` chose other content (a
        // time, a random value): its events are in the stream now, and theirs is the result.
        folded = await foldStream(store, stream, decider.evolve, folded, {}, visit);
        if (earlier.found) return earlier.result(attempt);
      }
      throw err;
    }
  }
}

/**
 * The result of an append made by `handleCommand` (or found as a duplicate of the same ids): the
 * recorded events, and the state folded up to the last of them.
 */
async function appendedResult<State>(
  store: EventStore,
  stream: string,
  evolve: Evolve<State>,
  folded: Folded<State>,
  appended: { version: number; ids: string[]; duplicate: boolean },
  attempts: number,
): Promise<CommandResult<State, never>> {
  const first = appended.version - appended.ids.length + 1;
  const events: RecordedEvent[] = [];
  let state = folded.state;
  const read = store.readStream(stream, {
    fromVersion: Math.min(first, folded.version + 1),
    limit: appended.version - Math.min(first, folded.version + 1) + 1,
  });
  for await (const e of read) {
    if (e.version > folded.version) state = evolve(state, e);
    if (e.version >= first) events.push(e);
  }
  return {
    ok: true,
    state,
    version: Math.max(appended.version, folded.version),
    events,
    duplicate: appended.duplicate,
    attempts,
  };
}

/** Watches a fold for the events of an earlier handling of the same command. */
class EarlierResult<State> {
  private readonly events: RecordedEvent[] = [];
  private state: State | undefined;

  constructor(readonly commandId: string) {
    if (typeof commandId !== 'string' || commandId.length === 0 || commandId.length > MAX_COMMAND_ID_LENGTH) {
      throw new InvalidInputError('commandId', `must be a string of 1-${MAX_COMMAND_ID_LENGTH} characters`);
    }
  }

  get found(): boolean {
    return this.events.length > 0;
  }

  visit(event: RecordedEvent, state: State): void {
    if (event.metadata.commandId !== this.commandId) return;
    this.events.push(event);
    this.state = state;
  }

  result(attempts: number): CommandResult<State, never> {
    const last = this.events[this.events.length - 1]!;
    return {
      ok: true,
      state: this.state as State,
      version: last.version,
      events: this.events,
      duplicate: true,
      attempts,
    };
  }

  /** The events with the command id in their metadata and, unless they bring their own, derived ids. */
  stamp(events: readonly NewEvent[]): NewEvent[] {
    return events.map((e, i) => ({
      ...e,
      id: e.id ?? commandEventId(this.commandId, i),
      metadata: { ...e.metadata, commandId: this.commandId },
    }));
  }
}

function isRejected<Reason>(decision: Decision<Reason>): decision is Rejected<Reason> {
  return (
    decision !== null && typeof decision === 'object' && !Array.isArray(decision) && 'rejected' in decision
  );
}

function validateRetries(value: unknown): number {
  if (value === undefined) return 3;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0 || value > MAX_COMMAND_RETRIES) {
    throw new InvalidInputError('retries', `must be an integer from 0 to ${MAX_COMMAND_RETRIES}`);
  }
  return value;
}
