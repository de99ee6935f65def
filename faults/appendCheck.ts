/** Appenders that retry an unanswered append with the same ids, and the check of what the store kept. */
import type { EventStore } from '../src/core/eventStore.js';
import { delay } from './processes.js';
import { randomUuid, type Random } from './random.js';
import { readEvents } from './stores.js';

export interface AckedAppend {
  stream: string;
  ids: string[];
}

export interface AppenderResult {
  acked: AckedAppend[];
  /** Appends answered `duplicate` (a retry of one that had been written). */
  duplicates: number;
  /** Failed tries (outcome unknown) that were retried. */
  retries: number;
  /** Errors that are not connection faults (should be none). */
  unexpected: string[];
}

/** Appends to its own streams `<prefix>-0..4` until `stop()`, retrying each append with the same ids until it is answered. */
export async function retryingAppender(
  store: EventStore,
  prefix: string,
  r: Random,
  stop: () => boolean,
  retryable: (err: unknown) => boolean,
): Promise<AppenderResult> {
  const out: AppenderResult = { acked: [], duplicates: 0, retries: 0, unexpected: [] };
  while (!stop()) {
    const req: AckedAppend = {
      stream: `${prefix}-${r.int(0, 4)}`,
      ids: Array.from({ length: r.int(1, 3) }, () => randomUuid(r)),
    };
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await store.append(
          req.stream,
          req.ids.map((id, i) => ({ id, type: 'fault.appended', data: { i } })),
        );
        if (res.duplicate) out.duplicates++;
        out.acked.push(req);
        break;
      } catch (err) {
        if (!retryable(err) || attempt > 200) {
          out.unexpected.push(err instanceof Error ? `${err.name}: ${err.message}` : String(err));
          break;
        }
        out.retries++;
        await delay(20);
      }
    }
  }
  return out;
}

/** Lost, doubled and out-of-order of acknowledged appends against the store's content. */
export async function checkAppends(
  store: EventStore,
  results: readonly AppenderResult[],
): Promise<{ lost: number; doubled: number; outOfOrder: number; stored: number }> {
  const events = await readEvents(store);
  const expected = new Set(results.flatMap((r) => r.acked.flatMap((a) => a.ids)));
  const byStream = new Map<string, string[]>();
  const seen = new Map<string, number>();
  let outOfOrder = 0;
  for (const e of events) {
    if (!expected.has(e.id) && !e.stream.includes('-')) continue;
    const list = byStream.get(e.stream) ?? [];
    list.push(e.id);
    byStream.set(e.stream, list);
    if (e.version !== list.length) outOfOrder++;
    seen.set(e.id, (seen.get(e.id) ?? 0) + 1);
  }
  for (const r of results) {
    const perStream = new Map<string, string[]>();
    for (const a of r.acked) perStream.set(a.stream, [...(perStream.get(a.stream) ?? []), ...a.ids]);
    for (const [stream, ids] of perStream) {
      const stored = (byStream.get(stream) ?? []).filter((id) => expected.has(id));
      if (ids.filter((id) => seen.has(id)).join() !== stored.join()) outOfOrder++;
    }
  }
  let lost = 0;
  for (const id of expected) if (!seen.has(id)) lost++;
  let doubled = 0;
  for (const [id, n] of seen) if (expected.has(id)) doubled += n - 1;
  return { lost, doubled, outOfOrder, stored: events.length };
}
