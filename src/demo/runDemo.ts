// `idem demo`: the billing consumer in a child process, over a temporary embedded store served by an
// in-process server, through a crash between commit and ack, a cut connection, duplicate appends, a
// version gap and a full rewind; then the target is checked against an exactly-once fold of the store.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { ConsumerMetricsSnapshot } from '../consumer/metrics.js';
import { InvalidInputError, isIdemError } from '../core/errors.js';
import type { RecordedEvent } from '../core/event.js';
import type { EventStore } from '../core/eventStore.js';
import { startServer, type RunningServer } from '../server/startServer.js';
import { openSqliteStore } from '../sqlite/sqliteStore.js';
import { BILLING_FILTER, CONSUMER_NAME, readCheckpoint, readTarget } from './billingTarget.js';
import { ConsumerProcess, type ChildMessage } from './consumerProcess.js';
import { CuttingProxy } from './cuttingProxy.js';
import { sumMetrics, verify, type DemoReport } from './report.js';
import { makeWorkload, type AppendUnit } from './workload.js';

export interface DemoOptions {
  /** Invoice events to append (about 10 per invoice). @default 2000 */
  events?: number;
  /** Keep the temporary directory (store, target) instead of removing it. @default false */
  keep?: boolean;
  /** Progress lines. @default none */
  log?: (line: string) => void;
}

export const DEFAULT_DEMO_EVENTS = 2000;

/** Appends the units concurrently (the store group-commits them); returns the events written and the appends made. */
async function appendUnits(
  store: EventStore,
  units: readonly AppendUnit[],
): Promise<{ events: number; appends: number }> {
  const results = await Promise.all(units.map((u) => store.append(u.stream, u.events)));
  let events = 0;
  for (const r of results) if (!r.duplicate) events += r.lastPosition - r.firstPosition + 1;
  return { events, appends: results.length };
}

async function readFiltered(
  store: EventStore,
  after = 0,
  upTo = Number.MAX_SAFE_INTEGER,
): Promise<RecordedEvent[]> {
  const out: RecordedEvent[] = [];
  for await (const e of store.readAll({ after, filter: BILLING_FILTER })) {
    if (e.position > upTo) break;
    out.push(e);
  }
  return out;
}

/** `consumers.reset`, retried while the stopped owner's lease is still being released. */
async function resetCursor(store: EventStore, position: number): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      await store.consumers.reset(CONSUMER_NAME, position);
      return;
    } catch (err) {
      if (!isIdemError(err) || err.code !== 'consumer_busy' || Date.now() > deadline) throw err;
      await delay(20);
    }
  }
}

/** The consumer's cursor, read once the store shows no owner (or the lease would have expired anyway). */
async function cursorOnceReleased(store: EventStore): Promise<number> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const info = await store.consumers.get(CONSUMER_NAME);
    if (info.owner === null || Date.now() > deadline) return info.position;
    await delay(10);
  }
}

const isKind =
  (kind: ChildMessage['kind']) =>
  (m: ChildMessage): boolean =>
    m.kind === kind;

/** Runs a command on the child and waits for its answer. */
async function ask(
  p: ConsumerProcess,
  command: 'start' | 'sync' | 'stop',
  answer: ChildMessage['kind'],
): Promise<ChildMessage> {
  const from = p.mark();
  p.send(command);
  return p.waitFor(from, isKind(answer), `"${answer}" after "${command}"`);
}

export async function runDemo(options: DemoOptions = {}): Promise<DemoReport> {
  const total = options.events ?? DEFAULT_DEMO_EVENTS;
  if (!Number.isSafeInteger(total) || total < 20 || total > 1_000_000)
    throw new InvalidInputError('events', 'must be an integer from 20 to 1000000');
  const started = performance.now();
  const log = options.log ?? ((): void => undefined);
  const say = (line: string): void =>
    log(`[${((performance.now() - started) / 1000).toFixed(1).padStart(5)}s] ${line}`);

  const dir = mkdtempSync(join(tmpdir(), 'idem-demo-'));
  const targetPath = join(dir, 'billing.db');
  const children: ConsumerProcess[] = [];
  let server: RunningServer | null = null;
  let proxy: CuttingProxy | null = null;
  const store = await openSqliteStore({ path: join(dir, 'events.db'), durability: 'normal' });
  try {
    server = await startServer({ store, host: '127.0.0.1', port: 0 });
    proxy = await CuttingProxy.start(server.port);
    say(
      `temporary store in ${dir}; server at ${server.url}; consumer processes reach it through a TCP proxy at ${proxy.url}`,
    );

    const workload = makeWorkload(total);
    const units = workload.units;
    const phase1 = Math.max(1, Math.floor(units.length * 0.4));
    let appended = await appendUnits(store, units.slice(0, phase1));
    let appends = appended.appends;
    let events = appended.events;
    const killAt = Math.max(1, Math.ceil((await store.headPosition()) / 2));
    say(
      `appended ${events} invoice events (issued, line_added, paid); starting consumer process 1, set to SIGKILL itself right after the commit that reaches position ${killAt}`,
    );

    // (b) A crash between commit and ack.
    let kills = 0;
    const first = ConsumerProcess.spawn(proxy.url, targetPath, killAt);
    children.push(first);
    const killing = await first.waitFor(0, isKind('killing'), 'the crash');
    const exit = await first.exited;
    if (exit.signal !== 'SIGKILL')
      throw new Error(`consumer process 1 ended with ${exit.code ?? exit.signal}, not SIGKILL`);
    kills++;
    const runs: (ConsumerMetricsSnapshot | null)[] = [killing.metrics];
    const checkpoint = readCheckpoint(targetPath);
    // Once the server has seen the dead socket close (its lease released), every ack it sent is applied.
    const cursor = await cursorOnceReleased(store);
    const unacknowledged = (await readFiltered(store, cursor, checkpoint)).length;
    say(
      `crash: process 1 (pid ${first.pid}) committed up to position ${checkpoint} and was SIGKILLed before acknowledging; the store's cursor is at ${cursor}: ${unacknowledged} events committed but unacknowledged`,
    );

    const second = ConsumerProcess.spawn(proxy.url, targetPath, 0);
    children.push(second);
    await second.waitFor(0, isKind('ready'), 'ownership of billing_v2');
    say(
      `consumer process 2 (pid ${second.pid}) took over billing_v2; the store redelivers from position ${cursor + 1}`,
    );

    // Appends while it runs, and (c) a cut connection in the middle.
    const rest = units.slice(phase1);
    const half = Math.floor(rest.length / 2);
    appended = await appendUnits(store, rest.slice(0, half));
    appends += appended.appends;
    events += appended.events;
    await second.waitFor(0, (m) => (m.metrics?.processed ?? 0) > 0, 'processing');
    const cut = proxy.cut();
    say(
      `appended ${appended.events} more events while it runs; reconnect: cut ${cut} connection(s) between the consumer process and the server`,
    );
    appended = await appendUnits(store, rest.slice(half));
    appends += appended.appends;
    events += appended.events;
    const reconnected = await second.waitFor(0, (m) => (m.metrics?.reconnects ?? 0) >= 1, 'a reconnect');
    say(
      `appended ${appended.events} more events; the consumer reconnected (reconnects=${reconnected.metrics?.reconnects ?? 0})`,
    );

    // (a) Duplicate appends: every tenth append sent again with the same event ids.
    const again = units.filter((_, i) => i % 10 === 0);
    const dup = await Promise.all(again.map((u) => store.append(u.stream, u.events)));
    const duplicateAppends = {
      appends: again.length,
      events: again.reduce((s, u) => s + u.events.length, 0),
      answeredDuplicate: dup.filter((r) => r.duplicate).length,
    };
    for (const r of dup) if (!r.duplicate) events += r.lastPosition - r.firstPosition + 1;
    say(
      `duplicates: sent ${duplicateAppends.appends} appends (${duplicateAppends.events} events) again with the same ids; the store answered "duplicate" to ${duplicateAppends.answeredDuplicate}`,
    );

    const synced = await ask(second, 'sync', 'synced');
    say(
      `caught up: position ${synced.metrics?.position ?? 0}, ${synced.metrics?.duplicates ?? 0} redelivered events skipped so far in this run`,
    );
    runs.push((await ask(second, 'stop', 'stopped')).metrics);
    const redeliveredAfter = { delivered: runs[1]?.delivered ?? 0, duplicates: runs[1]?.duplicates ?? 0 };

    // (d) A version gap: the cursor is moved past two events of one invoice, so the consumer sees the third
    // one right after the version before them, and its entity-version guard reads the two from the stream.
    const gapStream = units[0]!.stream;
    const gapAppend = await store.append(
      gapStream,
      [1, 2, 3].map((j) => ({
        id: randomUUID(),
        type: 'invoice.line_added',
        data: { invoiceId: gapStream, line: 100 + j, amount: 5 * j },
      })),
    );
    appends++;
    events += 3;
    const cursorMovedTo = gapAppend.firstPosition + 1;
    await resetCursor(store, cursorMovedTo);
    const skipped: [number, number] = [gapAppend.version - 2, gapAppend.version - 1];
    say(
      `gap: appended ${gapStream} v${skipped[0]}-v${gapAppend.version} and moved the cursor to ${cursorMovedTo} (consumers.reset): billing gets v${gapAppend.version} after v${skipped[0] - 1}`,
    );
    await ask(second, 'start', 'ready');
    const gapSynced = await ask(second, 'sync', 'synced');
    runs.push((await ask(second, 'stop', 'stopped')).metrics);
    say(
      `gap: the entity-version guard saw ${gapSynced.metrics?.gaps ?? 0} gap(s), read ${gapSynced.metrics?.recovered ?? 0} event(s) from the stream and caught up`,
    );

    // (a) A duplicate delivery of everything: the cursor rewound to 0.
    await resetCursor(store, 0);
    await ask(second, 'start', 'ready');
    await ask(second, 'sync', 'synced');
    const rewindRun = (await ask(second, 'stop', 'stopped')).metrics;
    runs.push(rewindRun);
    const rewind = { delivered: rewindRun?.delivered ?? 0, duplicates: rewindRun?.duplicates ?? 0 };
    say(
      `rewind: consumers.reset(${CONSUMER_NAME}, 0): ${rewind.delivered} events delivered again, ${rewind.duplicates} skipped as already handled`,
    );
    second.send('exit');
    await second.exited;

    const storeEvents = await readFiltered(store);
    const target = readTarget(targetPath);
    const v = verify(storeEvents, target);
    const sum = sumMetrics(runs);
    // Gaps seen by runs that went on to catch up (a gap that cannot be recovered stops the consumer).
    const gapsRecovered = sumMetrics(runs.slice(1)).gaps;
    const report: DemoReport = {
      ok:
        v.lost === 0 &&
        v.doubled === 0 &&
        v.unexpected === 0 &&
        v.invoicesEqual === v.expected.invoices &&
        v.actual.invoices === v.expected.invoices,
      durationMs: Math.round(performance.now() - started),
      dir: options.keep === true ? dir : null,
      events,
      invoices: workload.invoices,
      appends,
      duplicateAppends,
      delivered: sum.delivered,
      duplicatesSkipped: sum.duplicates,
      gaps: sum.gaps,
      gapsRecovered,
      recoveredEvents: sum.recovered,
      reconnects: sum.reconnects,
      kills,
      consumerProcesses: children.length,
      consumerRuns: runs.length,
      crash: { checkpoint, cursor, unacknowledged, redeliveredAfter },
      reconnect: { connectionsCut: proxy.cutConnections },
      gap: {
        stream: gapStream,
        skippedVersions: skipped,
        deliveredVersion: gapAppend.version,
        cursorMovedTo,
      },
      rewind,
      totals: { expected: v.expected, actual: v.actual, invoicesEqual: v.invoicesEqual },
      applied: v.applied,
      ledgerRows: target.ledgerRows,
      lost: v.lost,
      doubled: v.doubled,
      unexpected: v.unexpected,
    };
    return report;
  } finally {
    for (const c of children) c.kill();
    await Promise.all(children.map((c) => c.exited));
    await proxy?.close();
    await server?.close();
    await store.close();
    if (options.keep !== true) rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
  }
}
