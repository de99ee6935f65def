/**
 * A repeating timer whose ticks fall on multiples of its period on the clock, so that the heartbeats
 * of one process's subscriptions with the same lease tick in the same turn of the event loop, and a
 * backend stores their renewals together (one statement or commit) instead of one each. The first
 * tick comes within one period, never later than an unaligned timer's would.
 */
export class AlignedInterval {
  private timer: NodeJS.Timeout;
  private stopped = false;

  constructor(
    private readonly tick: () => void,
    private readonly periodMs: number,
  ) {
    const first = periodMs - (Date.now() % periodMs);
    this.timer = setTimeout(() => {
      if (this.stopped) return;
      this.timer = setInterval(this.tick, this.periodMs);
      this.tick();
    }, first);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.timer);
  }
}
