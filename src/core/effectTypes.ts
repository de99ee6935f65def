import type { KnownKeys } from './knownKeys.js';

/** The life of an outbox row. */
export type EffectStatus = 'pending' | 'done' | 'failed' | 'suppressed';

export const EFFECT_STATUSES: readonly EffectStatus[] = ['pending', 'done', 'failed', 'suppressed'];

/** An outbox row as the API and the CLI show it. */
export interface EffectRecord {
  /** The key space: the consumer's base name by default (`billing` for `billing_v3`). */
  scope: string;
  /** The effect's key in its scope: `${event.id}:${kind}` unless the handler gave one. */
  key: string;
  /** What the dispatcher hands to the external system: `<scope>/<key>`. */
  idempotencyKey: string;
  kind: string;
  payload: unknown;
  /** The consumer version that wrote the row, and the event it was written for. */
  consumer: string;
  eventId: string;
  position: number;
  status: EffectStatus;
  /** Dispatch attempts started so far (a claim counts as one, even if the process died during the call). */
  attempts: number;
  /** What the handler returned (JSON), once done. */
  result: unknown;
  lastError: string | null;
  /** When the next attempt may start (pending rows). */
  nextAttemptAt: string | null;
  /** The dispatcher holding the row, and until when (an expired lease is taken over). */
  leaseOwner: string | null;
  leaseUntil: string | null;
  createdAt: string;
  updatedAt: string;
}

/** A new outbox row. */
export interface NewEffect {
  scope: string;
  key: string;
  kind: string;
  payload: string;
  consumer: string;
  eventId: string;
  position: number;
  status: 'pending' | 'suppressed';
  /** The W3C trace context the dispatch span continues, or null. */
  traceparent: string | null;
}

/** A row claimed by a dispatcher. */
export interface ClaimedEffect {
  id: number;
  scope: string;
  key: string;
  kind: string;
  payload: unknown;
  attempts: number;
  /** The consumer whose handler wrote the row. */
  consumer: string;
  /** The trace context recorded with the row (the event's), or null. */
  traceparent: string | null;
}

/** A consumer version as recorded in the target when it first started. */
export interface ConsumerVersionRecord {
  consumer: string;
  /** The base name (`billing`) and effect scope. */
  base: string;
  scope: string;
  /** Events at or below this position are history for this version: their effects are suppressed. */
  liveFrom: number;
  /** The version this one rebuilds, when started by a rebuild. */
  rebuildOf: string | null;
  createdAt: string;
}

/** Which version of a consumer readers use. */
export interface ActiveVersionRecord {
  base: string;
  consumer: string;
  /** The version's acknowledged position when it was promoted. */
  position: number;
  promotedAt: string;
  /** The version active before, if any. */
  previous: string | null;
}

export type EffectCounts = Record<EffectStatus, number>;

/** Options of `ctx.effect`. */
export interface EffectCallOptions {
  /** The effect's key in the consumer's scope. @default `${event.id}:${kind}` */
  key?: string;
}

export const EFFECT_CALL_OPTION_KEYS = { key: true } as const satisfies KnownKeys<EffectCallOptions>;

/** What `ctx.effect` did. */
export interface EffectWrite {
  key: string;
  idempotencyKey: string;
  /** `pending` (will be dispatched), `suppressed` (history during a replay), or `existing` (the key was already in the outbox: nothing written). */
  status: 'pending' | 'suppressed' | 'existing';
}
