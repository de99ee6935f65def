/** The latest instant a JavaScript Date can hold (8.64e15 ms after the epoch). */
const LATEST_MS = 8.64e15;

/**
 * ISO-8601 text of a stored instant (a Date, or milliseconds since the epoch) that never throws:
 * an instant beyond what a Date can hold (an invalid Date, a huge number) is shown as the latest
 * one, so a stored row with an absurd lease can still be listed, shown and released.
 */
export function isoTime(value: Date | number): string {
  const ms = typeof value === 'number' ? value : value.getTime();
  if (Number.isNaN(ms) || ms > LATEST_MS) return new Date(LATEST_MS).toISOString();
  if (ms < -LATEST_MS) return new Date(-LATEST_MS).toISOString();
  return new Date(ms).toISOString();
}
