import { IdemError, InvalidInputError } from './errors.js';
import type { RecordedEvent } from './event.js';
import type { JsonObject, JsonValue } from './json.js';
import { MAX_TYPE_LENGTH } from './limits.js';

/** One step of an event type's schema: turns the data of `fromVersion` into that of `fromVersion + 1`. */
export interface Upcaster {
  /** The schema version this step reads (1 for events written without `metadata.schemaVersion`). */
  fromVersion: number;
  /** The data of the next version. Pure: it runs on every read of an old event. */
  up: (data: JsonValue, metadata: JsonObject) => JsonValue;
}

/**
 * Upcasters by event type, each list a chain of consecutive versions (`fromVersion` 1, 2, ...). An event
 * whose `metadata.schemaVersion` (absent: 1) has steps is read as the chain's last version: its data
 * passed through each step, `metadata.schemaVersion` set to that version. The stored event never changes.
 */
export type Upcasters = Readonly<Record<string, readonly Upcaster[]>>;

/** Upcasts events in place (the array's elements are replaced) and returns the array. */
export type UpcastEvents = (events: RecordedEvent[]) => RecordedEvent[];

/** The highest schema version an event may state. */
export const MAX_SCHEMA_VERSION = 1_000_000;

/** An event's schema version: `metadata.schemaVersion`, or 1 when absent (or not a version). */
export function schemaVersionOf(metadata: JsonObject): number {
  const v = metadata.schemaVersion;
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 1 ? v : 1;
}

/** Checks a `metadata.schemaVersion` stated by an append. */
export function validateSchemaVersion(value: unknown, field: string): void {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1 || value > MAX_SCHEMA_VERSION) {
    throw new InvalidInputError(field, `must be an integer from 1 to ${MAX_SCHEMA_VERSION}`);
  }
}

interface Chain {
  /** The `fromVersion` of the first step. */
  first: number;
  steps: Upcaster['up'][];
}

/**
 * Checks `upcasters` and returns the function the read paths apply to each page, or `null` when there
 * are none: a store without upcasters then does no work per event.
 */
export function compileUpcasters(upcasters: unknown, field = 'upcasters'): UpcastEvents | null {
  if (upcasters === undefined) return null;
  if (upcasters === null || typeof upcasters !== 'object' || Array.isArray(upcasters)) {
    throw new InvalidInputError(field, 'must be an object of upcaster lists by event type');
  }
  const chains = new Map<string, Chain>();
  for (const [type, list] of Object.entries(upcasters as Record<string, unknown>)) {
    const at = `${field}[${JSON.stringify(type)}]`;
    if (type.length === 0 || type.length > MAX_TYPE_LENGTH) {
      throw new InvalidInputError(at, `must be keyed by an event type of 1-${MAX_TYPE_LENGTH} characters`);
    }
    chains.set(type, compileChain(list, at));
  }
  if (chains.size === 0) return null;
  return (events) => {
    for (let i = 0; i < events.length; i++) {
      const e = events[i]!;
      const chain = chains.get(e.type);
      if (chain) events[i] = upcast(e, chain);
    }
    return events;
  };
}

function compileChain(list: unknown, at: string): Chain {
  if (!Array.isArray(list) || list.length === 0) {
    throw new InvalidInputError(at, 'must be a non-empty array of { fromVersion, up }');
  }
  const steps = (list as unknown[]).map((step, i) => {
    const s = step as Partial<Upcaster> | null;
    if (s === null || typeof s !== 'object')
      throw new InvalidInputError(`${at}[${i}]`, 'must be { fromVersion, up }');
    const v = s.fromVersion;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1 || v >= MAX_SCHEMA_VERSION) {
      throw new InvalidInputError(
        `${at}[${i}].fromVersion`,
        `must be an integer from 1 to ${MAX_SCHEMA_VERSION - 1}`,
      );
    }
    if (typeof s.up !== 'function') throw new InvalidInputError(`${at}[${i}].up`, 'must be a function');
    return { fromVersion: v, up: s.up };
  });
  steps.sort((a, b) => a.fromVersion - b.fromVersion);
  const first = steps[0]!.fromVersion;
  steps.forEach((s, i) => {
    if (s.fromVersion !== first + i) {
      throw new InvalidInputError(
        `${at}`,
        `must be a chain of consecutive versions (has fromVersion ${first + i - 1}, then ${s.fromVersion})`,
      );
    }
  });
  return { first, steps: steps.map((s) => s.up) };
}

/** The event read as its chain's last version, or the event itself when no step applies. */
function upcast(e: RecordedEvent, chain: Chain): RecordedEvent {
  const version = schemaVersionOf(e.metadata);
  const from = version - chain.first;
  if (from < 0 || from >= chain.steps.length) return e;
  let data = e.data;
  for (let i = from; i < chain.steps.length; i++) {
    try {
      data = chain.steps[i]!(data, e.metadata);
    } catch (err) {
      throw new IdemError(
        'upcast_failed',
        `the upcaster of "${e.type}" from version ${chain.first + i} failed on event ${e.id} ` +
          `(${e.stream}@${e.version}): ${err instanceof Error ? err.message : String(err)}`,
        { type: e.type, fromVersion: chain.first + i, id: e.id, stream: e.stream, version: e.version },
        { cause: err },
      );
    }
  }
  return { ...e, data, metadata: { ...e.metadata, schemaVersion: chain.first + chain.steps.length } };
}
