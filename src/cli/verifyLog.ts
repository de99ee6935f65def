import type { RecordedEvent } from '../core/event.js';

export type ViolationKind =
  'position_gap' | 'position_order' | 'head_mismatch' | 'version_gap' | 'duplicate_id';

export interface Violation {
  kind: ViolationKind;
  message: string;
}

export interface VerifyReport {
  ok: boolean;
  events: number;
  streams: number;
  head: number;
  /** Count of each kind of violation found. */
  counts: Record<ViolationKind, number>;
  /** The first violations found (at most `maxExamples`). */
  violations: Violation[];
}

/**
 * Checks a store's log as read in position order: positions are exactly 1..head with no gap or
 * repeat, each stream's versions are 1, 2, 3, ... in position order, and no id appears twice.
 * Memory grows with the number of distinct ids and streams.
 */
export async function verifyLog(
  events: AsyncIterable<RecordedEvent>,
  head: number,
  maxExamples = 20,
): Promise<VerifyReport> {
  const counts: Record<ViolationKind, number> = {
    position_gap: 0,
    position_order: 0,
    head_mismatch: 0,
    version_gap: 0,
    duplicate_id: 0,
  };
  const violations: Violation[] = [];
  const report = (kind: ViolationKind, message: string): void => {
    counts[kind]++;
    if (violations.length < maxExamples) violations.push({ kind, message });
  };
  const versions = new Map<string, number>();
  const ids = new Map<string, number>();
  let expected = 1;
  let n = 0;
  let last = 0;
  for await (const e of events) {
    n++;
    if (e.position > expected) {
      report('position_gap', `${range(expected, e.position - 1)} missing (next is #${e.position})`);
    } else if (e.position < expected) {
      report('position_order', `#${e.position} (${e.stream}@${e.version}) comes after #${last}`);
    }
    expected = Math.max(expected, e.position + 1);
    last = e.position;
    const prev = versions.get(e.stream) ?? 0;
    if (e.version !== prev + 1) {
      report(
        'version_gap',
        `${e.stream}: version ${e.version} at #${e.position} follows version ${prev} (expected ${prev + 1})`,
      );
    }
    versions.set(e.stream, Math.max(prev, e.version));
    const seen = ids.get(e.id);
    if (seen !== undefined)
      report('duplicate_id', `id ${e.id} at #${e.position} was already used at #${seen}`);
    else ids.set(e.id, e.position);
  }
  if (last !== head)
    report('head_mismatch', `the head position is ${head} but the last event read is #${last}`);
  const ok = violations.length === 0;
  return { ok, events: n, streams: versions.size, head, counts, violations };
}

function range(a: number, b: number): string {
  return a === b ? `position #${a} is` : `positions #${a}..#${b} are`;
}
