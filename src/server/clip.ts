/**
 * Bounds what an error quotes back from a request, so a client cannot make a reply (or the buffer
 * of replies a slow reader has not taken) as large as what it sent.
 */

/** Characters of one client-supplied value (a key, a header) quoted in an error. */
export const MAX_QUOTED = 64;
/** Characters of an error message on the wire. */
export const MAX_MESSAGE = 1024;
/** Characters of one error detail's JSON on the wire; a larger detail is replaced by a note of its size. */
export const MAX_DETAIL = 4096;

/** `text` itself when short, else its start and its length. */
export function clip(text: string, max = MAX_QUOTED): string {
  return text.length <= max ? text : `${text.slice(0, max)}... (${text.length} characters)`;
}

/** Error details with every value bounded: strings clipped, anything whose JSON is larger replaced by its size. */
export function clipDetails(details: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(details)) {
    const k = clip(key);
    if (typeof value === 'string') out[k] = clip(value, MAX_DETAIL);
    else {
      const size = JSON.stringify(value)?.length ?? 0;
      out[k] = size <= MAX_DETAIL ? value : `(${size} characters of JSON, not repeated)`;
    }
  }
  return out;
}
