import type { LedgerEntry } from '../core/consumerTarget.js';
import type { RecordedEvent } from '../core/event.js';
import type { ParkInfo, RedrivePolicy } from '../core/subscription.js';

/** What committed batch transactions did; applied to the metrics only after the commit. */
export interface BatchTally {
  /** Committed target transactions. */
  transactions: number;
  processed: number;
  duplicates: number;
  gaps: number;
  recovered: number;
  deadLetters: number;
  parked: number;
  parkedStreams: string[];
  handledStreams: string[];
  handlerSeconds: number[];
  recordedAtMs: number[];
}

export function emptyTally(): BatchTally {
  return {
    transactions: 0,
    processed: 0,
    duplicates: 0,
    gaps: 0,
    recovered: 0,
    deadLetters: 0,
    parked: 0,
    parkedStreams: [],
    handledStreams: [],
    handlerSeconds: [],
    recordedAtMs: [],
  };
}

/** Adds `more` to `into`. */
export function addTally(into: BatchTally, more: BatchTally): void {
  into.transactions += more.transactions;
  into.processed += more.processed;
  into.duplicates += more.duplicates;
  into.gaps += more.gaps;
  into.recovered += more.recovered;
  into.deadLetters += more.deadLetters;
  into.parked += more.parked;
  for (const s of more.parkedStreams) into.parkedStreams.push(s);
  for (const s of more.handledStreams) into.handledStreams.push(s);
  for (const s of more.handlerSeconds) into.handlerSeconds.push(s);
  for (const ms of more.recordedAtMs) into.recordedAtMs.push(ms);
}

export interface Park {
  position: number;
  stream: string;
  info: ParkInfo;
}

function errorInfo(err: Error): NonNullable<ParkInfo['error']> {
  const code = (err as { code?: unknown }).code;
  return {
    name: err.name,
    ...(typeof code === 'string' && code.length > 0 ? { code } : {}),
    message: err.message,
    ...(err.stack ? { stack: err.stack } : {}),
  };
}

/**
 * What one batch transaction did, to write at its commit: the ledger rows of the handled events, the
 * dead letters to park, and the tally for the metrics.
 */
export class BatchRecorder {
  readonly tally = emptyTally();
  readonly entries: LedgerEntry[] = [];
  readonly parks: Park[] = [];
  /** Streams with a dead letter in this batch: their later delivered events are parked behind it. */
  readonly parkedBehind: Set<string>;

  /** `parkedBefore`: streams parked by earlier transactions of the same delivered batch. */
  constructor(parkedBefore: ReadonlySet<string>) {
    this.parkedBehind = new Set(parkedBefore);
  }

  /** Counts a handled event: its ledger rows are written with the batch. */
  handled(e: RecordedEvent, keys: string[]): void {
    for (const key of keys) this.entries.push({ key, position: e.position });
    this.tally.processed++;
    this.tally.handledStreams.push(e.stream);
    this.tally.recordedAtMs.push(Date.parse(e.recordedAt));
  }

  handlerTime(startedMs: number): void {
    this.tally.handlerSeconds.push((performance.now() - startedMs) / 1000);
  }

  /** Dead-letters `e` (its handler failed `attempts` times); its stream's later delivered events park behind it. */
  deadLetter(e: RecordedEvent, error: Error, attempts: number, redrive: RedrivePolicy | null): void {
    this.parks.push({
      position: e.position,
      stream: e.stream,
      info: {
        reason: `handler failed after ${attempts} attempt(s)`,
        error: errorInfo(error),
        attempts,
        ...(redrive ? { redrive } : {}),
      },
    });
    this.parkedBehind.add(e.stream);
    this.tally.deadLetters++;
    this.tally.parked++;
    this.tally.parkedStreams.push(e.stream);
  }
}
