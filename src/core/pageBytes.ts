/**
 * How many of the first `count` items of a page to deliver so that their sizes (`sizeOf(i)`, in
 * bytes) stay within `maxBytes`: the page ends before the item that would pass the bound, but always
 * holds its first item, however large, so delivery never stalls.
 */
export function countWithinBytes(count: number, sizeOf: (i: number) => number, maxBytes: number): number {
  let total = 0;
  for (let i = 0; i < count; i++) {
    total += sizeOf(i);
    if (total > maxBytes && i > 0) return i;
  }
  return count;
}
