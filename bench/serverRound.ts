// Where a round of 16 concurrent single-event appends through the server goes (docs/benchmarks.md,
// "Known to be missed", appends through the server), beside the same round in-process and a bare
// TCP round trip between two processes:
//   node --import tsx bench/serverRound.ts [sqlite | postgres-url] [events] [runs]
// Each run: a server on a new store in a child process (this file, forked), 20,000 appends of the
// bench's workload from 16 callers through `connect(url)`'s append WebSocket to warm it up, then
// `events` (default 10,000) timed, each step the median over the run's frames, and the slowest tenth
// of the rounds apart (their mean, their share of the time, and their trips and group); then the
// same callers in-process on a new store, its rounds taken the same way; then 3,000 exchanges of a
// 4 KB buffer with an echo process over loopback TCP; then the raw rounds: the same callers' events
// as the raw baseline's rows (no idem), a turn's rows committed together (a better-sqlite3
// transaction, or one `pg` multi-VALUES insert) in this process, then in a child that gets them as a
// line of JSON over loopback TCP and answers a line: the least a process boundary adds to a round.
// Timestamps come from `process.hrtime`, one monotonic clock for both processes; the WebSocket's
// `emit` and `send` (the `ws` package's, which client and server share) and the store's `append` are
// wrapped to take them. SQLite stores (durability full) go in temporary directories, PostgreSQL ones
// in new databases; all are removed at the end.
import { fork, type ChildProcess } from 'node:child_process';
import { createServer, connect as tcpConnect, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import WebSocket from 'ws';
import { connect } from '../src/client/index.js';
import type { NewEvent } from '../src/core/event.js';
import type { EventStore } from '../src/core/eventStore.js';
import { quantile } from '../src/bench/measure.js';
import { RawPostgresEvents } from '../src/bench/rawPostgres.js';
import { RawSqliteEvents } from '../src/bench/rawSqlite.js';
import { BenchResources, loadPgModule } from '../src/bench/resources.js';
import type { RawRow } from '../src/bench/workload.js';
import { appendInCalls } from '../src/bench/scenarios/sqliteAppend.js';
import { openPostgresStore } from '../src/postgres/index.js';
import { startServer } from '../src/server/index.js';
import { openSqliteStore } from '../src/sqlite/index.js';

const CALLERS = 16;
const WARM_UP = 20_000;

const now = (): number => Number(process.hrtime.bigint()) / 1000;

/** Records when a WebSocket of this process emits a message and when it sends one. */
function recordFrames(): { received: number[]; sent: number[] } {
  const times = { received: [] as number[], sent: [] as number[] };
  const proto = WebSocket.prototype as unknown as {
    emit: (event: string | symbol, ...args: unknown[]) => boolean;
    send: (...args: unknown[]) => void;
  };
  const emit = proto.emit;
  const send = proto.send;
  proto.emit = function (this: unknown, event, ...args) {
    if (event === 'message') times.received.push(now());
    return emit.call(this, event, ...args);
  };
  proto.send = function (this: unknown, ...args) {
    times.sent.push(now());
    send.apply(this, args);
  };
  return times;
}

/** Wraps `store.append`: each group's span, from its first call to its first result. */
function recordGroups(store: EventStore): [number, number][] {
  const groups: [number, number][] = [];
  const append = store.append.bind(store);
  let start: number | null = null;
  store.append = async (...args) => {
    start ??= now();
    const mine = start;
    const result = await append(...args);
    if (start === mine) {
      groups.push([mine, now()]);
      start = null;
    }
    return result;
  };
  return groups;
}

function openStore(where: string): Promise<EventStore> {
  return where.startsWith('postgres')
    ? openPostgresStore({ connectionString: where })
    : openSqliteStore({ path: where, durability: 'full' });
}

/** `n` single-event appends of the bench's workload from 16 callers; answers events/s. */
async function appendFrom16(store: Pick<EventStore, 'append'>, n: number): Promise<number> {
  return (await appendInCalls(store, n, 1, CALLERS, 'v7')).eventsPerSec;
}

function median(xs: readonly number[]): number {
  return quantile(
    [...xs].sort((a, b) => a - b),
    0.5,
  );
}

function sum(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0);
}

function mean(xs: readonly number[]): number {
  return sum(xs) / xs.length;
}

/**
 * The rounds' spread: `rounds[i]` is round i's time and `parts[name][i]` a step of it. Gives the
 * median round, the mean of the slowest tenth of rounds, their share of all the rounds' time, and
 * each part's mean over that slowest tenth.
 */
function slowestTenth(
  prefix: string,
  rounds: readonly number[],
  parts: Record<string, readonly number[]>,
): Record<string, number> {
  const slow = rounds
    .map((t, i) => [t, i] as const)
    .sort((a, b) => b[0] - a[0])
    .slice(0, Math.max(1, Math.round(rounds.length / 10)))
    .map(([, i]) => i);
  return {
    [`${prefix}round, median, µs`]: median(rounds),
    [`${prefix}round, slowest tenth (mean), µs`]: mean(slow.map((i) => rounds[i]!)),
    [`${prefix}slowest tenth's share of the time, %`]: (100 * sum(slow.map((i) => rounds[i]!))) / sum(rounds),
    ...Object.fromEntries(
      Object.entries(parts).map(([name, xs]) => [
        `${prefix}${name} in the slowest tenth (mean), µs`,
        mean(slow.map((i) => xs[i]!)),
      ]),
    ),
  };
}

interface ServerTimes {
  received: number[];
  sent: number[];
  groups: [number, number][];
}

/** The child: a server on the store at `where`; answers `times` with what it recorded since the last ask. */
async function serve(where: string): Promise<void> {
  const frames = recordFrames();
  const store = await openStore(where);
  const groups = recordGroups(store);
  const server = await startServer({ store, port: 0 });
  process.on('message', (m: string) => {
    if (m === 'times') {
      process.send!({ ...frames, groups } satisfies ServerTimes);
      for (const list of [frames.received, frames.sent, groups]) list.length = 0;
    } else {
      void server
        .close()
        .then(() => store.close())
        .then(() => process.exit(0));
    }
  });
  process.send!(server.url);
}

/** The child: echoes what it reads on a TCP socket. */
function echo(): void {
  const server = createServer((socket) => {
    socket.setNoDelay(true);
    socket.on('data', (d) => socket.write(d));
  });
  server.listen(0, '127.0.0.1', () => process.send!((server.address() as AddressInfo).port));
  process.on('disconnect', () => process.exit(0));
}

function nextMessage<T>(child: ChildProcess): Promise<T> {
  return new Promise((resolve) => child.once('message', (m) => resolve(m as T)));
}

async function throughServer(where: string, events: number): Promise<Record<string, number>> {
  const child = fork(new URL(import.meta.url), ['--serve', where]);
  const url = await nextMessage<string>(child);
  const frames = recordFrames();
  const remote = connect(url);
  try {
    await appendFrom16(remote, WARM_UP);
    child.send('times');
    await nextMessage<ServerTimes>(child);
    frames.received.length = 0;
    frames.sent.length = 0;
    const rate = await appendFrom16(remote, events);
    child.send('times');
    const server = await nextMessage<ServerTimes>(child);
    const steps: Record<string, number[]> = {
      'client to server': [],
      'server: frame parsed, first append': [],
      'server: the group (checks, commit)': [],
      'server: results sent': [],
      'server to client': [],
      'client: results, next frame': [],
    };
    const s = Object.values(steps);
    const k = Math.min(frames.sent.length, server.received.length, server.groups.length, server.sent.length);
    for (let i = 1; i < k - 1; i++) {
      const [first, done] = server.groups[i]!;
      s[0]!.push(server.received[i]! - frames.sent[i]!);
      s[1]!.push(first - server.received[i]!);
      s[2]!.push(done - first);
      s[3]!.push(server.sent[i]! - done);
      s[4]!.push(frames.received[i]! - server.sent[i]!);
      s[5]!.push(frames.sent[i + 1]! - frames.received[i]!);
    }
    const rounds = s[0]!.map((_, j) => s.reduce((a, xs) => a + xs[j]!, 0));
    return {
      'events/s': rate,
      'round, µs': (CALLERS / rate) * 1e6,
      ...Object.fromEntries(Object.entries(steps).map(([name, xs]) => [`${name}, µs`, median(xs)])),
      ...slowestTenth('', rounds, {
        'the two trips': s[0]!.map((x, j) => x + s[4]![j]!),
        'the group': s[2]!,
      }),
    };
  } finally {
    await remote.close();
    child.send('close');
    await new Promise((resolve) => child.once('exit', resolve));
  }
}

async function inProcess(where: string, events: number): Promise<Record<string, number>> {
  const store = await openStore(where);
  try {
    const groups = recordGroups(store);
    await appendFrom16(store, WARM_UP);
    groups.length = 0;
    const rate = await appendFrom16(store, events);
    // A round in-process: from a group's first append to the next group's first append.
    const timedGroups = groups.slice(0, -1);
    return {
      'in-process events/s': rate,
      'in-process round, µs': (CALLERS / rate) * 1e6,
      'in-process group, µs': median(groups.map(([a, b]) => b - a)),
      ...slowestTenth(
        'in-process ',
        timedGroups.map(([a], i) => groups[i + 1]![0] - a),
        { 'the group': timedGroups.map(([a, b]) => b - a) },
      ),
    };
  } finally {
    await store.close();
  }
}

async function tcpRoundTrip(): Promise<Record<string, number>> {
  const child = fork(new URL(import.meta.url), ['--echo']);
  const port = await nextMessage<number>(child);
  const socket = tcpConnect(port, '127.0.0.1');
  socket.setNoDelay(true);
  await new Promise((resolve) => socket.once('connect', resolve));
  const buf = Buffer.alloc(4096, 120);
  const trips: number[] = [];
  for (let i = 0; i < 3_000; i++) {
    const t = now();
    let got = 0;
    const back = new Promise<void>((resolve) => {
      const on = (d: Buffer): void => {
        got += d.length;
        if (got < buf.length) return;
        socket.off('data', on);
        resolve();
      };
      socket.on('data', on);
    });
    socket.write(buf);
    await back;
    trips.push(now() - t);
  }
  socket.destroy();
  child.disconnect();
  return { 'TCP round trip (4 KB), µs': median(trips) };
}

/**
 * The same 16 callers and events without idem: each event becomes the raw baseline's row (its data
 * and metadata as JSON text), a turn of the event loop's rows go to `flush` together, and each
 * caller gets its row's position back. `flushes` gets the time of each flush's start.
 */
function rawAppends(
  flush: (rows: RawRow[]) => Promise<number>,
  flushes: number[],
): Pick<EventStore, 'append'> {
  let queue: { row: RawRow; resolve: (position: number) => void }[] = [];
  const send = (): void => {
    const batch = queue;
    queue = [];
    flushes.push(now());
    void flush(batch.map((q) => q.row)).then((last) => {
      batch.forEach((q, i) => q.resolve(last - batch.length + 1 + i));
    });
  };
  const append = (stream: string, events: readonly NewEvent[]): Promise<number> => {
    const e = events[0]!;
    const row = {
      id: e.id!,
      stream,
      type: e.type,
      data: JSON.stringify(e.data),
      metadata: JSON.stringify(e.metadata ?? {}),
    };
    return new Promise((resolve) => {
      if (queue.length === 0) setImmediate(send);
      queue.push({ row, resolve });
    });
  };
  // The callers only wait for the call: a position stands in for the store's result.
  return { append } as unknown as Pick<EventStore, 'append'>;
}

/** Calls `onLine` with each line (without its newline) that arrives on `socket`. */
function readLines(socket: Socket, onLine: (line: string) => void): void {
  let buffered = '';
  socket.on('data', (d) => {
    buffered += d.toString();
    let end: number;
    while ((end = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
      onLine(line);
    }
  });
}

/** The raw baseline's writer for a temporary directory (SQLite) or a database (PostgreSQL). */
interface RawWriter {
  write(rows: readonly RawRow[]): number | Promise<number>;
  close(): void | Promise<void>;
}

async function openRaw(where: string, name: string): Promise<RawWriter> {
  return where.startsWith('postgres')
    ? RawPostgresEvents.open(await loadPgModule(), where)
    : new RawSqliteEvents(where, name);
}

/** The child: a raw group commit of the rows each line brings, answered by a line with the last position. */
async function rawServe(where: string): Promise<void> {
  const raw = await openRaw(where, 'raw-served');
  const server = createServer((socket) => {
    socket.setNoDelay(true);
    readLines(socket, (line) => {
      void Promise.resolve(raw.write(JSON.parse(line) as RawRow[])).then((last) => socket.write(`${last}\n`));
    });
  });
  server.listen(0, '127.0.0.1', () => process.send!((server.address() as AddressInfo).port));
  process.on('disconnect', () => {
    void Promise.resolve(raw.close()).then(() => process.exit(0));
  });
}

/**
 * The floor under a process boundary on this machine: the same callers' rounds with the least work a
 * server could do, raw group commits (better-sqlite3 transactions, or `pg` multi-VALUES inserts) in
 * this process on the store at `local`, then the same rows sent as a line of JSON over loopback TCP
 * to a child that commits them to the store at `remote` and answers a line.
 */
async function rawRounds(local: string, remote: string, events: number): Promise<Record<string, number>> {
  const rounds = async (store: Pick<EventStore, 'append'>, flushes: number[]): Promise<[number, number]> => {
    await appendFrom16(store, WARM_UP);
    flushes.length = 0;
    const rate = await appendFrom16(store, events);
    return [rate, median(flushes.slice(1).map((t, i) => t - flushes[i]!))];
  };
  const raw = await openRaw(local, 'raw-local');
  const localFlushes: number[] = [];
  let inProcessRate: number;
  let inProcessRound: number;
  try {
    [inProcessRate, inProcessRound] = await rounds(
      rawAppends((rows) => Promise.resolve(raw.write(rows)), localFlushes),
      localFlushes,
    );
  } finally {
    await raw.close();
  }
  const child = fork(new URL(import.meta.url), ['--raw-serve', remote]);
  const port = await nextMessage<number>(child);
  const socket = tcpConnect(port, '127.0.0.1');
  socket.setNoDelay(true);
  await new Promise((resolve) => socket.once('connect', resolve));
  const waiting: ((last: number) => void)[] = [];
  readLines(socket, (line) => waiting.shift()!(Number(line)));
  const remoteFlushes: number[] = [];
  try {
    const [rate, round] = await rounds(
      rawAppends(
        (rows) =>
          new Promise((resolve) => {
            waiting.push(resolve);
            socket.write(`${JSON.stringify(rows)}\n`);
          }),
        remoteFlushes,
      ),
      remoteFlushes,
    );
    return {
      'raw in-process events/s': inProcessRate,
      'raw in-process round, median, µs': inProcessRound,
      'raw across processes events/s': rate,
      'raw across processes round, median, µs': round,
    };
  } finally {
    socket.destroy();
    child.disconnect();
    await new Promise((resolve) => child.once('exit', resolve));
  }
}

async function main(): Promise<void> {
  const [target = 'sqlite', eventsArg = '10000', runsArg = '3'] = process.argv.slice(2);
  const events = Number(eventsArg);
  const runs = Number(runsArg);
  const resources = new BenchResources(target.startsWith('postgres') ? target : '');
  const newStore = async (): Promise<string> =>
    target.startsWith('postgres') ? resources.postgresDatabase() : join(await resources.tempDir(), 'idem.db');
  const newRawPlace = (): Promise<string> =>
    target.startsWith('postgres') ? resources.postgresDatabase() : resources.tempDir();
  const rows: Record<string, number>[] = [];
  try {
    for (let run = 1; run <= runs; run++) {
      rows.push({
        ...(await throughServer(await newStore(), events)),
        ...(await inProcess(await newStore(), events)),
        ...(await tcpRoundTrip()),
        ...(await rawRounds(await newRawPlace(), await newRawPlace(), events)),
      });
      console.error(`run ${run}/${runs} done`);
    }
  } finally {
    await resources.cleanup();
  }
  console.log(
    `| ${target.startsWith('postgres') ? 'PostgreSQL' : 'SQLite'} | ${rows.map((_, i) => `run ${i + 1}`).join(' | ')} |`,
  );
  console.log(`|---|${rows.map(() => '---').join('|')}|`);
  for (const name of Object.keys(rows[0]!)) {
    console.log(`| ${name} | ${rows.map((r) => Math.round(r[name]!).toLocaleString('en-US')).join(' | ')} |`);
  }
  const ratio = rows.map((r) => (r['events/s']! / r['in-process events/s']!).toFixed(2));
  console.log(`| through the server / in-process | ${ratio.join(' | ')} |`);
  const medians = rows.map((r) => (r['in-process round, median, µs']! / r['round, median, µs']!).toFixed(2));
  console.log(`| the same, median rounds | ${medians.join(' | ')} |`);
  // What a process boundary adds to a median round at the least (the raw rounds'), added to idem's
  // in-process round: the best ratio any server of idem's in-process store could reach here.
  const floor = rows.map(
    (r) => r['raw across processes round, median, µs']! - r['raw in-process round, median, µs']!,
  );
  console.log(
    `| raw: across processes / in-process (rates) | ${rows.map((r) => (r['raw across processes events/s']! / r['raw in-process events/s']!).toFixed(2)).join(' | ')} |`,
  );
  console.log(
    `| raw: what the boundary adds to a median round, µs | ${floor.map((f) => Math.round(f)).join(' | ')} |`,
  );
  const best = rows.map(
    (r, i) => r['in-process round, median, µs']! / (r['in-process round, median, µs']! + floor[i]!),
  );
  console.log(
    `| best ratio for idem: its in-process median round / (that + the raw addition) | ${best.map((b) => b.toFixed(2)).join(' | ')} |`,
  );
}

if (process.argv[2] === '--serve') await serve(process.argv[3]!);
else if (process.argv[2] === '--echo') echo();
else if (process.argv[2] === '--raw-serve') await rawServe(process.argv[3]!);
else await main();
