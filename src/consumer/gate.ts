/**
 * At most `limit` holders at once; the others wait in arrival order. The partitions a group member
 * holds share one, so that only so many of their batch transactions run at a time.
 */
export class Gate {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(readonly limit: number) {}

  /** Resolves once a place is free; call the function it resolves to when done (once). */
  async enter(): Promise<() => void> {
    if (this.active < this.limit) this.active++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const next = this.waiting.shift();
      // The place passes straight to the next waiter: `active` stays the same.
      if (next) next();
      else this.active--;
    };
  }
}
