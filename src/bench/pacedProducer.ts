import { setTimeout as delay } from 'node:timers/promises';
import type { EventStore } from '../core/eventStore.js';
import { monotonicMs } from './commitClock.js';
import { newEvent, streamOf } from './workload.js';

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

/** What a producer child process tells its parent (see liveServerChild.ts). */
export type ServerChildMessage =
  | { kind: 'ready'; url: string }
  | ({ kind: 'sent'; ids: string[] } & PacedSends)
  | { kind: 'error'; message: string };

/** What the parent tells a producer child: start appending, or close. */
export type ParentMessage = { kind: 'go' } | { kind: 'close' };

/** Sends a message to the parent process. */
export function tellParent(m: ServerChildMessage): void {
  process.send?.(m);
}

/**
 * A producer child's side of the IPC: says `ready` with `url`; on `go` appends `total` events at
 * `rate` per second to `store` and reports `sent` once every append is acknowledged. Resolves on
 * `close` or when the parent goes.
 */
export function serveProducer(
  store: Pick<EventStore, 'append'>,
  total: number,
  rate: number,
  url: string,
): Promise<void> {
  const closed = new Promise<void>((resolve) => {
    process.on('message', (m: ParentMessage) => {
      if (m.kind === 'close') resolve();
      if (m.kind !== 'go') return;
      const events = Array.from({ length: total }, (_, i) => newEvent(i));
      const appends: Promise<unknown>[] = [];
      pacedSends(total, rate, (i) => appends.push(store.append(streamOf(i), [events[i]!])))
        .then(async (sends) => {
          await Promise.all(appends);
          tellParent({ kind: 'sent', ids: events.map((e) => e.id), ...sends });
        })
        .catch((err: unknown) =>
          tellParent({ kind: 'error', message: err instanceof Error ? err.message : String(err) }),
        );
    });
    process.on('disconnect', resolve);
  });
  tellParent({ kind: 'ready', url });
  return closed;
}
