import type { RecordedEvent } from '../core/event.js';
import type { ConsumerPause, PartitionInfo, Subscription } from '../core/subscription.js';

/**
 * - `idle`: created, or waiting for ownership (standby) or to reconnect;
 * - `running`: owns the consumer and processes events;
 * - `stopped`: `stop()` was called, or ownership was lost to another process (`lastError` says so);
 * - `failed`: stopped on an error (`then: 'stop'`, `gaps: 'fail'`, identity conflict...);
 * - `paused`: owns the consumer but processes nothing new: paused by an operator (`consumers.pause`),
 *   or by itself during an outage (it then probes with one event until that succeeds).
 */
export type ConsumerState = 'idle' | 'running' | 'stopped' | 'failed' | 'paused';

export interface ConsumerRuntimeStatus {
  name: string;
  state: ConsumerState;
  /** What the consumer is doing inside its state. */
  phase:
    | 'created'
    | 'starting'
    | 'standby'
    | 'catching_up'
    | 'live'
    | 'paused'
    | 'reconnecting'
    | 'stopping'
    | 'done';
  /** Last acknowledged position. */
  position: number;
  /** The ownership epoch of the current (or last) subscription; 0 before the first. */
  epoch: number;
  lastError?: { name: string; message: string; code?: string };
  /** Set while paused: why (an operator's pause or an outage), since when, by whom. */
  pause?: ConsumerPause;
  /** The event the consumer stopped at, when it failed on one. */
  failedEvent?: Pick<RecordedEvent, 'id' | 'stream' | 'version' | 'position' | 'type' | 'metadata'>;
  /** A consumer group's member: its id (the owner of its partitions' leases). */
  member?: string;
  /** A consumer group's member: the live members it last saw, itself included. */
  members?: string[];
  /** A consumer group's member: the partitions it holds (lag is shown by `consumers.get`). */
  partitions?: PartitionInfo[];
}

/** One start-to-stop cycle: what `stop()` must abort, close and wait for. */
export interface Run {
  /** Resolves (or rejects) once the consumer runs, as `start()` does. */
  started: Promise<void>;
  /** The processing loop, once started. */
  loop: Promise<void> | null;
  sub: Subscription | null;
  /** Ends a reconnect's backoff. */
  wakeUp: AbortController;
  /** Ends a standby's wait for ownership. */
  subscribeAbort: AbortController;
}

/** The runtime's lifecycle: one variable, whose kind says what the consumer is doing. */
export type Lifecycle =
  | { kind: 'created' }
  | { kind: 'starting'; run: Run; standby: boolean }
  | { kind: 'catching_up' | 'live'; run: Run }
  | { kind: 'paused'; run: Run; pause: ConsumerPause; was: 'catching_up' | 'live' }
  | { kind: 'reconnecting'; run: Run }
  | {
      kind: 'stopping';
      run: Run;
      /** The state shown while stopping. */
      was: 'idle' | 'running';
      stopped: Promise<void>;
      /** Set when the consumer failed while stopping: it ends failed. */
      failed: { error: Error; event: RecordedEvent | null } | null;
    }
  | { kind: 'stopped' }
  | { kind: 'failed'; event: RecordedEvent | null };

export type Active = Extract<Lifecycle, { run: Run }>;

export function stateOf(life: Lifecycle): ConsumerState {
  switch (life.kind) {
    case 'catching_up':
    case 'live':
      return 'running';
    case 'paused':
      return 'paused';
    case 'stopping':
      return life.was;
    case 'stopped':
    case 'failed':
      return life.kind;
    default:
      return 'idle';
  }
}

export function phaseOf(life: Lifecycle): ConsumerRuntimeStatus['phase'] {
  switch (life.kind) {
    case 'starting':
      return life.standby ? 'standby' : 'starting';
    case 'stopped':
    case 'failed':
      return 'done';
    default:
      return life.kind;
  }
}
