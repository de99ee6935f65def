/**
 * Calls `pump` once the code that asked for it has run to its end: a microtask later, not a turn of
 * the event loop. Work submitted together (callers resumed by one reply, a `Promise.all`, the appends
 * of one request) is then seen by one call of `pump` instead of the first item alone and the rest
 * after it, while nothing waits for a timer. Asking again before `pump` ran asks once.
 */
export class MicrotaskPump {
  private scheduled = false;

  constructor(private readonly pump: () => void) {}

  schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      this.pump();
    });
  }
}
