import { InvalidInputError } from '../core/errors.js';
import { checkKnownKeys, type KnownKeys } from '../core/knownKeys.js';
import type { RecordedEvent } from '../core/event.js';

/** A key guard computed by the user: one effect per key. `name` namespaces the keys in the ledger. @default name 'key' */
export interface CustomKeyGuard {
  key: (event: RecordedEvent) => string;
  name?: string;
}

const CUSTOM_GUARD_KEYS = { key: true, name: true } as const satisfies KnownKeys<CustomKeyGuard>;

/**
 * How a consumer recognises an event it already handled:
 * - `'event-id'`: one effect per fact (the event's stable id);
 * - `'command-id'`: one effect per request (`metadata.commandId`; an event without one is an error);
 * - `{ key }`: one effect per key your function returns (never derive it from a mutable payload field);
 * - `'entity-version'`: ordered projection state; an event at or below the stream's last applied version is skipped.
 */
export type Guard = 'event-id' | 'command-id' | 'entity-version' | CustomKeyGuard;

export interface KeyGuard {
  readonly label: string;
  /** The ledger key, namespaced by guard. Throws `InvalidInputError` when the event has no key. */
  key(event: RecordedEvent): string;
}

export interface GuardSet {
  keyGuards: KeyGuard[];
  entityVersion: boolean;
}

const eventIdGuard: KeyGuard = { label: 'event-id', key: (e) => `event:${e.id}` };

const commandIdGuard: KeyGuard = {
  label: 'command-id',
  key(e) {
    const id = e.metadata['commandId'];
    if (typeof id !== 'string' || id.length === 0) {
      throw new InvalidInputError(
        `event ${e.id} (${e.stream} v${e.version}) metadata.commandId`,
        'is required by the command-id guard (a non-empty string)',
      );
    }
    return `command:${id}`;
  },
};

function customGuard(g: CustomKeyGuard, field: string): KeyGuard {
  checkKnownKeys(g, CUSTOM_GUARD_KEYS, field);
  const name = g.name ?? 'key';
  if (typeof name !== 'string' || !/^[A-Za-z0-9_.-]{1,64}$/.test(name)) {
    throw new InvalidInputError(`${field}.name`, 'must be 1-64 letters, digits, _ . or -');
  }
  return {
    label: name,
    key(e) {
      const k: unknown = g.key(e);
      if (typeof k !== 'string' || k.length === 0) {
        throw new InvalidInputError(
          `event ${e.id} (${e.stream} v${e.version}) guard "${name}"`,
          'must return a non-empty string key',
        );
      }
      return `${name}:${k}`;
    },
  };
}

export function normalizeGuards(guard: Guard | Guard[] | undefined, field = 'guard'): GuardSet {
  const list = guard === undefined ? ['event-id' as const] : Array.isArray(guard) ? guard : [guard];
  if (list.length === 0) throw new InvalidInputError(field, 'must name at least one guard');
  const set: GuardSet = { keyGuards: [], entityVersion: false };
  const labels = new Set<string>();
  list.forEach((g, i) => {
    const f = Array.isArray(guard) ? `${field}[${i}]` : field;
    let kg: KeyGuard | null;
    if (g === 'event-id') kg = eventIdGuard;
    else if (g === 'command-id') kg = commandIdGuard;
    else if (g === 'entity-version') {
      set.entityVersion = true;
      kg = null;
    } else if (g !== null && typeof g === 'object' && typeof g.key === 'function') kg = customGuard(g, f);
    else
      throw new InvalidInputError(
        f,
        "must be 'event-id', 'command-id', 'entity-version' or { key: (event) => string }",
      );
    if (kg) {
      if (labels.has(kg.label)) throw new InvalidInputError(f, `repeats the guard "${kg.label}"`);
      labels.add(kg.label);
      set.keyGuards.push(kg);
    }
  });
  return set;
}
