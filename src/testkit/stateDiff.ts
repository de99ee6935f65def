/** One place where two JSON states differ. */
export interface StateDifference {
  /** A JSON path such as `$.totals[2].amount`. */
  path: string;
  expected: unknown;
  actual: unknown;
}

/** Sorts object keys so that two equal states serialise alike. */
export function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value).sort()) out[k] = canonical((value as Record<string, unknown>)[k]);
    return out;
  }
  return value;
}

/** Round-trips through JSON (what `read` returns must be JSON: bigints and Dates are refused here). */
export function asJson(value: unknown): unknown {
  const text = JSON.stringify(value);
  return text === undefined ? null : (JSON.parse(text) as unknown);
}

/** The differences between `expected` and `actual`, at most `max` of them, depth first. */
export function diffStates(expected: unknown, actual: unknown, max = 10): StateDifference[] {
  const out: StateDifference[] = [];
  walk(expected, actual, '$', out, max);
  return out;
}

function walk(a: unknown, b: unknown, path: string, out: StateDifference[], max: number): void {
  if (out.length >= max) return;
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) walk(a[i], b[i], `${path}[${i}]`, out, max);
    return;
  }
  if (isObject(a) && isObject(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)].sort()))
      walk(a[k], b[k], `${path}.${k}`, out, max);
    return;
  }
  if (JSON.stringify(canonical(a)) !== JSON.stringify(canonical(b)))
    out.push({ path, expected: a, actual: b });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}
