import { IdempotencyConflictError } from './errors.js';
import type { AppendResult } from './event.js';
import type { PreparedEvent } from './validation.js';

/** What a store already holds under an id that an append wants to use. */
export interface ExistingEvent {
  id: string;
  stream: string;
  version: number;
  position: number;
  contentKey: string;
}

/**
 * Decides an append whose ids may already be stored:
 * - none stored: `null`, append normally;
 * - all stored, in this stream, in this order, with the same content: the original result (`duplicate: true`);
 * - anything else (other stream, other content, a partial overlap): `IdempotencyConflictError`.
 */
export function resolveIdempotentAppend(
  stream: string,
  events: readonly PreparedEvent[],
  existing: ReadonlyMap<string, ExistingEvent>,
): AppendResult | null {
  if (existing.size === 0) return null;
  const found: ExistingEvent[] = [];
  for (const e of events) {
    const old = existing.get(e.id);
    if (!old) {
      const first = existing.values().next().value as ExistingEvent;
      throw new IdempotencyConflictError(
        `append to "${stream}" mixes new events with event ${first.id}, which is already stored; ` +
          're-send exactly the original batch, or use new ids',
        { id: first.id, stream, existingStream: first.stream },
      );
    }
    if (old.stream !== stream) {
      throw new IdempotencyConflictError(
        `event ${e.id} is already stored in stream "${old.stream}", not "${stream}"`,
        {
          id: e.id,
          stream,
          existingStream: old.stream,
        },
      );
    }
    if (old.contentKey !== e.contentKey) {
      throw new IdempotencyConflictError(
        `event ${e.id} is already stored in "${stream}" with other content`,
        {
          id: e.id,
          stream,
        },
      );
    }
    found.push(old);
  }
  for (let i = 1; i < found.length; i++) {
    if (found[i]!.version !== found[i - 1]!.version + 1) {
      throw new IdempotencyConflictError(
        `events of this append are stored in "${stream}" but not as one contiguous batch in this order`,
        { id: found[i]!.id, stream },
      );
    }
  }
  return {
    stream,
    version: found[found.length - 1]!.version,
    firstPosition: found[0]!.position,
    lastPosition: found[found.length - 1]!.position,
    duplicate: true,
    ids: found.map((f) => f.id),
  };
}
