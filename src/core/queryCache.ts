/**
 * Queries prepared once per key (a filter's text) and kept while used: at most `limit` of them, the
 * least recently used dropped first. Every subscription and every consumer's lag has its own filter,
 * so the cache holds hundreds of queries without preparing one per read, and a stream of one-off
 * filters cannot grow it without bound.
 */
export class QueryCache<Q> {
  private readonly entries = new Map<string, Q>();

  constructor(private readonly limit = 1_024) {}

  get(key: string, prepare: () => Q): Q {
    const found = this.entries.get(key);
    if (found !== undefined) {
      // Moved to the end: the map's order is the order of use.
      this.entries.delete(key);
      this.entries.set(key, found);
      return found;
    }
    const made = prepare();
    if (this.entries.size >= this.limit) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, made);
    return made;
  }
}
