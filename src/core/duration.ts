import { InvalidInputError } from './errors.js';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A duration in milliseconds from a number (ms) or a text like `500ms`, `30s`, `5m`, `1h`, `2d`
 * (an integer or decimal number and one unit). Bad input names `field`.
 */
export function parseDuration(value: unknown, field: string): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0)
      throw new InvalidInputError(field, 'must be a duration: ms >= 0, or a text like "30s", "5m", "1h"');
    return Math.round(value);
  }
  const m = typeof value === 'string' ? /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(value.trim()) : null;
  if (!m) throw new InvalidInputError(field, 'must be a duration: ms >= 0, or a text like "30s", "5m", "1h"');
  return Math.round(Number(m[1]) * UNITS[m[2]!]!);
}
