import { setTimeout as delay } from 'node:timers/promises';
import { monotonicMs } from './commitClock.js';

export interface PacedSends {
  /** When the schedule started (`monotonicMs`). */
  startMs: number;
  /** When event i was handed to `send` (`monotonicMs`). */
  sentAt: number[];
  /**
   * How late event i was handed to `send` against its slot on the schedule (i / rate seconds after the
   * start), in ms. Latency is measured from `sentAt`, so it leaves this out: a producer held up by a
   * blocked event loop sends late, and the time it was held up is not part of the event's latency.
   */
  lateMs: number[];
}

/**
 * Calls `send(i)` for i = 0..total-1 at a steady `rate` per second, each send not awaited (as
 * independent producers would). Event i is due i / rate seconds after the start; when the event loop
 * was held up, the events that fell due meanwhile are sent at once on the next turn, so the schedule
 * does not drift.
 */
export async function pacedSends(
  total: number,
  rate: number,
  send: (i: number) => void,
): Promise<PacedSends> {
  const startMs = monotonicMs();
  const sentAt = new Array<number>(total);
  const lateMs = new Array<number>(total);
  let sent = 0;
  while (sent < total) {
    const now = monotonicMs();
    const due = Math.min(total, Math.floor(((now - startMs) / 1000) * rate) + 1);
    while (sent < due) {
      const i = sent++;
      const at = monotonicMs();
      sentAt[i] = at;
      lateMs[i] = Math.max(0, at - (startMs + (i * 1000) / rate));
      send(i);
    }
    await delay(1);
  }
  return { startMs, sentAt, lateMs };
}
