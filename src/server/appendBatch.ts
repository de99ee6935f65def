/**
 * The appends of `POST /v1/appends` and of the append WebSocket (`/v1/appends/ws`): each entry is
 * checked and decided on its own, exactly as `POST /v1/streams/:stream/events` would, and gets its
 * own result or error.
 */
import type { AppendResult, NewEvent } from '../core/event.js';
import type { AppendOptions, EventStore } from '../core/eventStore.js';
import { IdemError } from '../core/errors.js';
import type { WireError } from '../core/protocol.js';
import { prepareAppend, validateStreamName } from '../core/validation.js';
import { errorFor, requireStream } from './access.js';
import type { ServerLimits } from './context.js';
import { toIdemError, wireError } from './httpErrors.js';
import type { ServerMetrics } from './metrics.js';
import { appendItemSchema, parseWith } from './schemas.js';
import type { Principal } from './tokens.js';

/** One entry's outcome as the wire carries it. */
export type AppendOutcome = AppendResult | { error: WireError };

export interface AppendDeps {
  store: EventStore;
  limits: ServerLimits;
  /** False when the store's own check of each append is the server's (see `precheckAppends`). */
  precheckAppends: boolean;
  metrics: ServerMetrics;
}

/** An append whose stream the token may write: checked against the server's limits, then written. */
export async function appendChecked(
  deps: AppendDeps,
  stream: string,
  body: { events: unknown[]; expectedVersion?: AppendOptions['expectedVersion'] },
): Promise<AppendResult> {
  // Checked here against the server's own limits too, before the store sees anything: an encrypted
  // store seals the events (calling the subject function, creating keys) before its own check. A
  // store that checks first, against the same or stricter limits, answers exactly as this would.
  if (deps.precheckAppends) prepareAppend(stream, body.events, deps.limits);
  const options: AppendOptions = {};
  if (body.expectedVersion !== undefined) options.expectedVersion = body.expectedVersion;
  const result = await deps.store.append(stream, body.events as NewEvent[], options);
  deps.metrics.appended(result);
  return result;
}

/**
 * Every entry of a list of appends, each to its result or its error (fields named within the entry:
 * `events[0].type`, `stream`; `append` when the entry is not an object). They are all handed to the
 * store in the same turn of the event loop, so they share its group commit. `logError` gets the
 * errors that are not the caller's fault, which are answered `internal`.
 */
export function appendEach(
  deps: AppendDeps,
  principal: Principal,
  appends: readonly unknown[],
  logError: (err: unknown) => void,
): Promise<AppendOutcome[]> {
  const one = async (raw: unknown): Promise<AppendOutcome> => {
    try {
      const item = plainItem(raw) ?? parseWith(appendItemSchema, raw, '', 'append');
      const stream = validateStreamName(item.stream);
      requireStream(principal, stream);
      return await appendChecked(deps, stream, item);
    } catch (err) {
      const e = toIdemError(err, deps.limits.maxBodyBytes);
      if (e === null) {
        logError(err);
        return { error: wireError(new IdemError('internal', 'internal server error')) };
      }
      return { error: wireError(errorFor(principal, e)) };
    }
  };
  return Promise.all(appends.map(one));
}

type AppendItem = { stream: string; events: unknown[]; expectedVersion?: AppendOptions['expectedVersion'] };

/**
 * The entry itself when it is plainly well-formed (what every client sends), without the schema's
 * cost per append; otherwise null, and the schema names what is wrong.
 */
function plainItem(raw: unknown): AppendItem | null {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return null;
  const item = raw as Record<string, unknown>;
  let keys = 0;
  for (const key in item) {
    if (key !== 'stream' && key !== 'events' && key !== 'expectedVersion') return null;
    keys++;
  }
  if (typeof item.stream !== 'string' || !Array.isArray(item.events)) return null;
  const v = item.expectedVersion;
  if (v === undefined) return keys === 2 ? (item as AppendItem) : null;
  const valid =
    v === 'any' ||
    v === 'no_stream' ||
    v === 'stream_exists' ||
    (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0);
  return valid ? (item as AppendItem) : null;
}
