import { IdemError } from '../core/errors.js';
import type { RecordedEvent } from '../core/event.js';
import { exitCodeFor, type ExitCode } from './exitCodes.js';
import { UsageError } from './usageError.js';

/** Where the command writes. Injectable so that `main` can run in-process in tests. */
export interface Io {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

/** The JSON object printed on stdout for a failure with `--json`. */
export interface ErrorReport {
  error: { code: string; message: string; details: Readonly<Record<string, unknown>> };
}

/**
 * Human or machine output. Results go to stdout (one JSON document, or NDJSON for streams, with
 * `--json`); progress notes and errors go to stderr so they never corrupt piped output.
 */
export class Output {
  constructor(
    readonly io: Io,
    readonly json: boolean,
  ) {}

  /** A line of human output on stdout; ignored with `--json`. */
  line(text: string): void {
    if (!this.json) this.io.stdout.write(`${text}\n`);
  }

  /** A note for the human at the terminal (stderr); ignored with `--json`. */
  note(text: string): void {
    if (!this.json) this.io.stderr.write(`${text}\n`);
  }

  /** One JSON document on stdout; ignored without `--json`. */
  data(value: unknown): void {
    if (this.json) this.io.stdout.write(`${JSON.stringify(value)}\n`);
  }

  /** Prints a failure (`idem: <code>: <message>` on stderr, and a JSON object on stdout with `--json`). */
  failure(err: unknown): ExitCode {
    const report = errorReport(err);
    this.io.stderr.write(`idem: ${report.error.code}: ${report.error.message}\n`);
    if (report.error.code === 'usage') this.io.stderr.write('(see `idem --help`, or `idem <verb> --help`)\n');
    if (this.json) this.io.stdout.write(`${JSON.stringify(report)}\n`);
    return exitCodeFor(report.error.code);
  }
}

export function errorReport(err: unknown): ErrorReport {
  if (err instanceof IdemError) return { error: err.toJSON() };
  if (err instanceof UsageError) return { error: { code: 'usage', message: err.message, details: {} } };
  const message = err instanceof Error ? err.message : (JSON.stringify(err) ?? 'unknown error');
  return { error: { code: 'internal', message, details: {} } };
}

/** A streaming JSON array writer, so large reads are printed without being held in memory. */
export class JsonArrayWriter {
  private count = 0;

  constructor(private readonly io: Io) {}

  push(value: unknown): void {
    this.io.stdout.write(`${this.count === 0 ? '[' : ','}\n${JSON.stringify(value)}`);
    this.count++;
  }

  end(): void {
    this.io.stdout.write(this.count === 0 ? '[]\n' : '\n]\n');
  }
}

/** `#12 invoice-42@3 invoice.paid 2026-01-01T00:00:00.000Z {"amount":10}` */
export function formatEvent(e: RecordedEvent): string {
  const meta = Object.keys(e.metadata).length > 0 ? ` meta=${JSON.stringify(e.metadata)}` : '';
  return `#${e.position} ${e.stream}@${e.version} ${e.type} ${e.recordedAt} ${JSON.stringify(e.data)}${meta}  id=${e.id}`;
}

/** Left-aligned columns for small tables (consumers, dead letters). */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const fmt = (r: string[]): string =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [fmt(header), ...rows.map(fmt)].join('\n');
}

export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}
