import type { QueryResult } from 'pg';
import type { ExpectedVersion } from '../core/expectedVersion.js';
import { MicrotaskPump } from '../core/microtaskPump.js';
import type { PreparedEvent } from '../core/validation.js';
import { int4Array, textArray, uuidArray } from './binaryArrays.js';
import type { KeptClients } from './checkout.js';
import { isConnectionFault } from './connectionFaults.js';
import { statementName } from './schemaName.js';

/** What `append_batch` decided for one append. */
export type BatchOutcome =
  | { kind: 'ok'; version: number; firstPosition: number; lastPosition: number }
  /** One of its ids is already stored; nothing was written. */
  | { kind: 'exists' }
  | { kind: 'wrong_expected_version'; actual: number };

/** A row of `append_batch` or `append_one`. */
interface OutcomeRow {
  outcome: string;
  version: number | null;
  first_position: string | null;
  last_position: string | null;
}

interface Pending {
  stream: string;
  expected: ExpectedVersion;
  events: readonly PreparedEvent[];
  resolve: (outcome: BatchOutcome) => void;
  reject: (err: unknown) => void;
}

export interface AppendBatcherOptions {
  /** The store's pool, through clients kept between statements that follow one another. */
  clients: KeptClients;
  /** The quoted schema. */
  s: string;
  /** Most events written by one statement. @default 10000 */
  maxBatchEvents?: number;
  /**
   * Statements in flight at once. The head row lock still serialises them (each waits for the one
   * before it to commit), but the next group travels, is parsed and waits for the lock while the
   * current one writes and flushes. @default 2
   */
  maxInFlight?: number;
  /**
   * Queued events needed before a statement is sent while another is in flight. Small appends
   * (commit-bound) gain more from waiting and joining one larger group than from an extra statement
   * that would only wait for the lock and then pay its own flush. @default 256
   */
  minPipelinedEvents?: number;
  /** Send the calls as named statements, prepared once per connection. @default true */
  preparedStatements?: boolean;
}

/**
 * Group commit for appends. Appends are serialised by the position allocator until they commit, so
 * each commit's flush to disk would cap throughput at one append per flush. Instead, appends that
 * arrive while a statement is in flight wait and then go together in the next `append_batch` call:
 * one round trip, one transaction, one flush for all of them. Each still gets its own outcome, and a
 * failing batch is retried one append at a time, so one bad append cannot fail its neighbours.
 *
 * Up to `maxInFlight` statements are sent at once, on separate connections. They still commit one
 * after another, in the order they take the head row lock, so positions stay gap-free and in commit
 * order; what overlaps is the work outside the lock: this process serialising the next group, the
 * network, and the server parsing its arrays.
 */
export class AppendBatcher {
  private queue: Pending[] = [];
  private inFlight = 0;
  /**
   * Pumps a microtask after a submit: appends submitted together (callers resumed by the same commit,
   * the server's appends of one request) go in one statement.
   */
  private readonly pumpSoon = new MicrotaskPump(() => this.pump());
  private readonly maxBatchEvents: number;
  private readonly maxInFlight: number;
  private readonly minPipelinedEvents: number;
  /** Events in `queue`. */
  private queuedEvents = 0;
  /**
   * Names of the three statements, prepared once per connection (no parsing and planning of the
   * call per append). They name the schema, since several stores may share one pool.
   */
  private readonly names: { event?: string; one?: string; group?: string };
  /** The three statements' texts, made once. */
  private readonly texts: { event: string; one: string; group: string };

  constructor(private readonly options: AppendBatcherOptions) {
    this.maxBatchEvents = options.maxBatchEvents ?? 10_000;
    this.maxInFlight = options.maxInFlight ?? 2;
    this.minPipelinedEvents = options.minPipelinedEvents ?? 256;
    this.names =
      options.preparedStatements === false
        ? {}
        : {
            event: statementName('append_event', options.s),
            one: statementName('append_one', options.s),
            group: statementName('append_batch', options.s),
          };
    const s = options.s;
    this.texts = {
      event: `SELECT ${s}.append_event($1::text, $2::text, $3::uuid, $4::text, $5::text, $6::text) AS r`,
      one: `SELECT outcome, version, first_position, last_position
         FROM ${s}.append_one($1::text, $2::text, $3::uuid[], $4::text[], $5::text[], $6::text[])`,
      group: `SELECT outcome, version, first_position, last_position
         FROM ${s}.append_batch($1::text[], $2::text[], $3::int[], $4::uuid[], $5::text[], $6::text[], $7::text[])`,
    };
  }

  submit(stream: string, expected: ExpectedVersion, events: readonly PreparedEvent[]): Promise<BatchOutcome> {
    return new Promise<BatchOutcome>((resolve, reject) => {
      this.queue.push({ stream, expected, events, resolve, reject });
      this.queuedEvents += events.length;
      this.pumpSoon.schedule();
    });
  }

  /** Starts groups while there are queued appends and a free slot. */
  private pump(): void {
    while (
      this.queue.length > 0 &&
      this.inFlight < this.maxInFlight &&
      (this.inFlight === 0 || this.queuedEvents >= this.minPipelinedEvents)
    ) {
      const batch = this.take();
      this.inFlight++;
      void this.send(batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async send(batch: Pending[]): Promise<void> {
    try {
      const outcomes = await this.run(batch);
      batch.forEach((p, i) => p.resolve(outcomes[i]!));
    } catch (err) {
      // A lost connection leaves every append of the batch with an unknown outcome: each caller
      // retries its own (and so learns that the outcome was unknown).
      if (batch.length === 1 || isConnectionFault(err)) {
        for (const p of batch) p.reject(err);
        return;
      }
      // Find the culprit: every append alone.
      for (const p of batch) {
        try {
          p.resolve((await this.run([p]))[0]!);
        } catch (e) {
          p.reject(e);
        }
      }
    }
  }

  private take(): Pending[] {
    let events = 0;
    let n = 0;
    while (n < this.queue.length) {
      const size = this.queue[n]!.events.length;
      if (n > 0 && events + size > this.maxBatchEvents) break;
      events += size;
      n++;
    }
    this.queuedEvents -= events;
    return this.queue.splice(0, n);
  }

  private async run(batch: readonly Pending[]): Promise<BatchOutcome[]> {
    if (batch.length === 1 && batch[0]!.events.length === 1) return [await this.runEvent(batch[0]!)];
    const r = batch.length === 1 ? await this.runOne(batch[0]!) : await this.runGroup(batch);
    if (r.rows.length !== batch.length)
      throw new Error(`append_batch returned ${r.rows.length} outcomes for ${batch.length} appends`);
    return r.rows.map((row): BatchOutcome => {
      if (row.outcome === 'ok') {
        return {
          kind: 'ok',
          version: row.version!,
          firstPosition: Number(row.first_position),
          lastPosition: Number(row.last_position),
        };
      }
      if (row.outcome === 'wrong_expected_version')
        return { kind: 'wrong_expected_version', actual: row.version! };
      return { kind: 'exists' };
    });
  }

  /** One event appended alone: `append_event`, scalar parameters and one text result (see migrations.ts). */
  private async runEvent(p: Pending): Promise<BatchOutcome> {
    const e = p.events[0]!;
    const r = await this.options.clients.query<{ r: string }>({
      name: this.names.event,
      text: this.texts.event,
      values: [p.stream, String(p.expected), e.id, e.type, e.dataJson, e.metadataJson],
    });
    return eventOutcome(r.rows[0]?.r);
  }

  /** One append of several events alone: `append_one`, a shorter function than the group's (see migrations.ts). */
  private runOne(p: Pending): Promise<QueryResult<OutcomeRow>> {
    return this.options.clients.query<OutcomeRow>({
      name: this.names.one,
      text: this.texts.one,
      values: [
        p.stream,
        String(p.expected),
        uuidArray(p.events.map((e) => e.id)),
        textArray(p.events.map((e) => e.type)),
        textArray(p.events.map((e) => e.dataJson)),
        textArray(p.events.map((e) => e.metadataJson)),
      ],
    });
  }

  private runGroup(batch: readonly Pending[]): Promise<QueryResult<OutcomeRow>> {
    const events = batch.flatMap((p) => p.events);
    return this.options.clients.query<OutcomeRow>({
      name: this.names.group,
      text: this.texts.group,
      // Binary arrays: no quoting of the JSON texts on either side (see binaryArrays.ts).
      values: [
        textArray(batch.map((p) => p.stream)),
        textArray(batch.map((p) => String(p.expected))),
        int4Array(batch.map((p) => p.events.length)),
        uuidArray(events.map((e) => e.id)),
        textArray(events.map((e) => e.type)),
        textArray(events.map((e) => e.dataJson)),
        textArray(events.map((e) => e.metadataJson)),
      ],
    });
  }
}

/** `append_event`'s result: `ok <version> <position>`, `exists` or `wrong_expected_version <version>`. */
function eventOutcome(text: string | undefined): BatchOutcome {
  const [outcome, a, b] = (text ?? '').split(' ');
  if (outcome === 'ok' && a !== undefined && b !== undefined) {
    const position = Number(b);
    return { kind: 'ok', version: Number(a), firstPosition: position, lastPosition: position };
  }
  if (outcome === 'wrong_expected_version' && a !== undefined)
    return { kind: 'wrong_expected_version', actual: Number(a) };
  if (outcome === 'exists') return { kind: 'exists' };
  throw new Error(`append_event returned ${JSON.stringify(text)}`);
}
