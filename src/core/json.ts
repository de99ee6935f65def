/** JSON values, and the canonical form used to compare event content. */

export type JsonPrimitive = null | boolean | number | string;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** Deepest nesting of arrays and objects accepted in event data and metadata. */
export const MAX_JSON_DEPTH = 512;

/**
 * Why `value` is not plain JSON, or `null` when it is. Rejects functions, symbols, BigInt, undefined,
 * non-finite numbers, cycles, objects that are not plain (Date, Map, class instances), and nesting
 * deeper than `MAX_JSON_DEPTH` (which would overflow the stack of every JSON reader after it).
 */
export function jsonProblem(
  value: unknown,
  path = '',
  seen: Set<object> = new Set(),
  depth = 0,
): string | null {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return null;
    case 'number':
      return Number.isFinite(value) ? null : `${path || 'value'} is not a finite number`;
    case 'bigint':
      return `${path || 'value'} is a BigInt, which JSON cannot represent`;
    case 'function':
      return `${path || 'value'} is a function`;
    case 'symbol':
      return `${path || 'value'} is a symbol`;
    case 'undefined':
      return `${path || 'value'} is undefined`;
    case 'object':
      break;
  }
  if (value === null) return null;
  const obj = value;
  if (seen.has(obj)) return `${path || 'value'} contains a cycle`;
  if (depth >= MAX_JSON_DEPTH) return `${path || 'value'} is nested deeper than ${MAX_JSON_DEPTH} levels`;
  seen.add(obj);
  try {
    if (Array.isArray(obj)) {
      for (let i = 0; i < obj.length; i++) {
        const p = jsonProblem(obj[i] as unknown, `${path}[${i}]`, seen, depth + 1);
        if (p) return p;
      }
      return null;
    }
    const proto = Object.getPrototypeOf(obj) as unknown;
    if (proto !== Object.prototype && proto !== null) {
      return `${path || 'value'} is not a plain object (${obj.constructor?.name ?? 'unknown'})`;
    }
    for (const [k, v] of Object.entries(obj)) {
      const p = jsonProblem(v, path ? `${path}.${k}` : k, seen, depth + 1);
      if (p) return p;
    }
    return null;
  } finally {
    seen.delete(obj);
  }
}

/**
 * True exactly when `jsonProblem(value)` is `null`, without building paths or sets: the check every
 * appended event's data and metadata go through. Call `jsonProblem` for the reason when it is false.
 * It allocates nothing for a flat object or array (the stack of enclosing containers, for the cycle
 * check, is made at the first nested one): this walk runs for every appended event, and building
 * that stack for every value costs about as much as the rest of the check.
 */
export function isPlainJson(value: unknown): boolean {
  return typeof value === 'object' && value !== null ? plainContainer(value, null) : plainLeaf(value);
}

/** A value that is not an object (or is null): plain when a string, a boolean, null or a finite number. */
function plainLeaf(value: unknown): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'object':
      return value === null;
    default:
      return false;
  }
}

/**
 * An array or object. `ancestors`: the containers enclosing it, outermost first (its length is the
 * depth), or `null` for the outermost one; its children get it with `value` pushed.
 */
function plainContainer(value: object, ancestors: object[] | null): boolean {
  if (ancestors !== null && (ancestors.length >= MAX_JSON_DEPTH || ancestors.includes(value))) return false;
  let inner: object[] | null = null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      if (typeof v !== 'object' || v === null) {
        if (!plainLeaf(v)) return false;
        continue;
      }
      if (inner === null) (inner = ancestors ?? []).push(value);
      if (!plainContainer(v, inner)) return false;
    }
  } else {
    const proto = Object.getPrototypeOf(value) as unknown;
    if (proto !== Object.prototype && proto !== null) return false;
    const obj = value as Record<string, unknown>;
    for (const k in obj) {
      if (!Object.hasOwn(obj, k)) continue;
      const v = obj[k];
      if (typeof v !== 'object' || v === null) {
        if (!plainLeaf(v)) return false;
        continue;
      }
      if (inner === null) (inner = ancestors ?? []).push(value);
      if (!plainContainer(v, inner)) return false;
    }
  }
  inner?.pop();
  return true;
}

/** JSON text with object keys sorted, so that equal content gives equal text whatever the key order. */
export function canonicalJson(value: JsonValue): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k] as JsonValue)}`).join(',')}}`;
}
