/**
 * The safety-net check of the service's subscriptions for dead letters set `retrying` by another
 * process (an operator's retry from the CLI or another server), made once for all of them: which of
 * the consumers open here have a `retrying` dead letter. A subscription then reads its own retrying
 * dead letters only when it has some, instead of every subscription asking on its own.
 */
export class RetryingProbe {
  private last: { at: number; asked: Set<string>; hits: Set<string> } | null = null;
  private probing: Promise<{ at: number; asked: Set<string>; hits: Set<string> }> | null = null;

  /**
   * @param probe answers which of `names` have a `retrying` dead letter (one query)
   * @param open the consumers of the subscriptions open here
   * @param maxAgeMs how old an answer may be and still be used
   */
  constructor(
    private readonly probe: (names: readonly string[]) => Promise<string[]>,
    private readonly open: () => Iterable<string>,
    private readonly maxAgeMs: number,
  ) {}

  /** Whether `consumer` may have a `retrying` dead letter: false only when a fresh enough answer says none. */
  async mayHave(consumer: string): Promise<boolean> {
    const asked = Date.now();
    const last = this.last;
    if (last && last.at >= asked - this.maxAgeMs && last.asked.has(consumer)) return last.hits.has(consumer);
    // Answers that started before this question are used too: they are at most a probe old.
    const answer = await (this.probing ??= this.run().finally(() => (this.probing = null)));
    // Opened after that probe started: it was not asked about.
    return !answer.asked.has(consumer) || answer.hits.has(consumer);
  }

  private async run(): Promise<{ at: number; asked: Set<string>; hits: Set<string> }> {
    const at = Date.now();
    const asked = new Set(this.open());
    const hits = new Set(asked.size === 0 ? [] : await this.probe([...asked]));
    const answer = { at, asked, hits };
    this.last = answer;
    return answer;
  }
}
