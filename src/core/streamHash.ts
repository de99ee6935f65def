/** Most partitions of a consumer group (and of a partition filter). */
export const MAX_PARTITIONS = 256;

/**
 * The stable hash of a stream name that places its events in a partition: 32-bit FNV-1a over the
 * UTF-8 bytes of the name, as an unsigned integer (0 .. 2^32 - 1). Offset basis 2166136261, prime
 * 16777619; for each byte `h = ((h XOR byte) * 16777619) mod 2^32`. The stores keep it with every
 * event (`stream_hash`), so any client language reproduces a partition as `streamHash(s) % count`.
 */
export function streamHash(stream: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < stream.length; i++) {
    let c = stream.charCodeAt(i);
    if (c < 0x80) {
      h = Math.imul(h ^ c, 0x01000193);
      continue;
    }
    if (c < 0x800) {
      h = Math.imul(h ^ (0xc0 | (c >> 6)), 0x01000193);
    } else {
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < stream.length) {
        const low = stream.charCodeAt(i + 1);
        if (low >= 0xdc00 && low <= 0xdfff) {
          i++;
          c = 0x10000 + ((c - 0xd800) << 10) + (low - 0xdc00);
          h = Math.imul(h ^ (0xf0 | (c >> 18)), 0x01000193);
          h = Math.imul(h ^ (0x80 | ((c >> 12) & 0x3f)), 0x01000193);
          h = Math.imul(h ^ (0x80 | ((c >> 6) & 0x3f)), 0x01000193);
          h = Math.imul(h ^ (0x80 | (c & 0x3f)), 0x01000193);
          continue;
        }
      }
      h = Math.imul(h ^ (0xe0 | (c >> 12)), 0x01000193);
      h = Math.imul(h ^ (0x80 | ((c >> 6) & 0x3f)), 0x01000193);
    }
    h = Math.imul(h ^ (0x80 | (c & 0x3f)), 0x01000193);
  }
  return h >>> 0;
}

/** The partition of `stream` among `count`: `streamHash(stream) % count`. */
export function streamPartition(stream: string, count: number): number {
  return streamHash(stream) % count;
}
