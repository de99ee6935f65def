import type { Pool } from 'pg';
import type { AppendOptions } from '../core/eventStore.js';
import type { AppendResult, NewEvent } from '../core/event.js';
import { WrongExpectedVersionError } from '../core/errors.js';
import { appendExpectation } from '../core/expectedVersion.js';
import { resolveIdempotentAppend, type ExistingEvent } from '../core/idempotency.js';
import type { StoreLimits } from '../core/limits.js';
import { prepareAppend, type PreparedEvent } from '../core/validation.js';
import type { AppendBatcher } from './appendBatcher.js';
import { withReconnect, type RetryOptions } from './connectionFaults.js';
import { EVENT_COLUMNS, toExistingEvent, type PostgresEventRow } from './eventRows.js';

export interface AppendContext {
  pool: Pool;
  /** The quoted schema. */
  s: string;
  limits: StoreLimits;
  retry: RetryOptions;
  batcher: AppendBatcher;
  /** Hears every connection fault an append retries after. */
  onFault?: () => void;
}

/**
 * Appends one batch: validates it, then lets `append_batch` (grouped with concurrent appends) check
 * ids and the expected version and write it. Ids already stored are resolved by the core rules
 * (duplicate result or `idempotency_conflict`).
 *
 * A connection fault before the answer arrives leaves the outcome unknown; the append is then tried
 * again on a new connection. If the first try committed, its ids are found and its result returned
 * (with `duplicate: false`, since the write was this call's own); otherwise the events are written
 * now. Nothing is lost or written twice, which is why any caller may safely retry an append whose
 * outcome it does not know, as long as it re-sends the same ids.
 */
export async function appendEvents(
  ctx: AppendContext,
  stream: string,
  events: NewEvent[],
  options: AppendOptions = {},
): Promise<AppendResult> {
  const prepared = prepareAppend(stream, events, ctx.limits);
  const expected = appendExpectation(options);
  let outcomeUnknown = false;
  return withReconnect(
    async (): Promise<AppendResult> => {
      const outcome = await ctx.batcher.submit(stream, expected, prepared);
      switch (outcome.kind) {
        case 'ok':
          return {
            stream,
            version: outcome.version,
            firstPosition: outcome.firstPosition,
            lastPosition: outcome.lastPosition,
            duplicate: false,
            ids: prepared.map((e) => e.id),
          };
        case 'wrong_expected_version':
          throw new WrongExpectedVersionError(stream, expected, outcome.actual);
        case 'exists': {
          const duplicate = await resolveStoredIds(ctx, stream, prepared);
          return outcomeUnknown ? { ...duplicate, duplicate: false } : duplicate;
        }
      }
    },
    ctx.retry,
    () => {
      outcomeUnknown = true;
      ctx.onFault?.();
    },
  );
}

/** The original result of an append whose ids are stored, or `IdempotencyConflictError`. */
async function resolveStoredIds(
  ctx: AppendContext,
  stream: string,
  prepared: PreparedEvent[],
): Promise<AppendResult> {
  const r = await ctx.pool.query<PostgresEventRow>(
    `SELECT ${EVENT_COLUMNS} FROM ${ctx.s}.events WHERE id = ANY($1::uuid[])`,
    [prepared.map((e) => e.id)],
  );
  const existing = new Map<string, ExistingEvent>(r.rows.map((row) => [row.id, toExistingEvent(row)]));
  const result = resolveIdempotentAppend(stream, prepared, existing);
  // Events are never deleted, so ids reported as stored are found; anything else is a bug.
  if (!result) throw new Error(`append to "${stream}": ids reported as stored were not found`);
  return result;
}
