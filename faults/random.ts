/** A small seeded PRNG (mulberry32), so a run with the same seed injects the same faults. */
export interface Random {
  /** A float in [0, 1). */
  next(): number;
  /** An integer in [min, max]. */
  int(min: number, max: number): number;
  /** True with probability p. */
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
  /** A derived generator, independent of later draws on this one. */
  fork(label: string): Random;
}

export function seededRandom(seed: number): Random {
  let a = seed >>> 0;
  const next = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const r: Random = {
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    chance: (p) => next() < p,
    pick: (items) => {
      if (items.length === 0) throw new Error('pick from an empty list');
      return items[Math.floor(next() * items.length)]!;
    },
    fork: (label) => {
      let h = seed >>> 0;
      for (let i = 0; i < label.length; i++) h = Math.imul(h ^ label.charCodeAt(i), 0x01000193) >>> 0;
      return seededRandom(h ^ Math.floor(next() * 2 ** 32));
    },
  };
  return r;
}

/** A deterministic UUID (v4 layout) from the generator, so appends can be retried with the same ids. */
export function randomUuid(r: Random): string {
  const hex = Array.from({ length: 32 }, () => Math.floor(r.next() * 16).toString(16));
  hex[12] = '4';
  hex[16] = '89ab'[Math.floor(r.next() * 4)]!;
  const s = hex.join('');
  return `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20)}`;
}
