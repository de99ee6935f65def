/**
 * Scenario 8: bad input at volume against a server process: fuzzed HTTP requests (the server suite's
 * fast-check generators) and fuzzed WebSocket frames. No 5xx, no crash, every error a documented one,
 * and the store unchanged.
 */
import { join } from 'node:path';
import fc from 'fast-check';
import WebSocket from 'ws';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { FUZZ_CONSUMER, malformedRequest, type FuzzRequest } from '../../test/server/malformedRequests.js';
import { ScriptRunner } from '../processes.js';
import { startServerChild, type ServerProcess } from '../serverChildren.js';
import { emptyBody, type Scenario, type ScenarioBody, type ScenarioContext } from '../types.js';
import { ASTRAL_STREAM, rssMib, runStoreProbes } from './storeProbes.js';

export const badInputScenario: Scenario = {
  name: 'bad-input-fuzz',
  proves:
    'fuzzed HTTP requests and WebSocket frames get documented 4xx errors, never a 5xx or a crash, and change nothing',
  run,
};

const SERVER_TYPES = new Set([
  'hello',
  'subscribed',
  'events',
  'caught_up',
  'ok',
  'error',
  'closed',
  'heartbeat',
  'pong',
]);
const junk = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.jsonValue({ maxDepth: 2 }),
);
/** A WebSocket frame: noise, or a protocol-shaped message with wrong fields (never the seeded consumer). */
const wsFrame: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.string({ unit: 'binary', maxLength: 100 }),
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
  fc
    .record(
      {
        type: fc.oneof(
          fc.constantFrom('subscribe', 'ack', 'park', 'fail', 'more', 'unsubscribe', 'ping'),
          fc.string({ maxLength: 12 }),
        ),
        sub: junk,
        consumer: fc.oneof(junk, fc.constantFrom('', 'x'.repeat(200), 'bad name', 'fuzzer:ok')),
        position: junk,
        filter: junk,
        from: junk,
        messages: junk,
        maxInFlight: junk,
        leaseTtlMs: junk,
        info: junk,
        req: junk,
      },
      { requiredKeys: ['type'] },
    )
    .map((m) => JSON.stringify(m)),
);

interface Snapshot {
  /** The /health status. */
  health: number;
  digest: string;
}

async function snapshot(url: string): Promise<Snapshot> {
  const res = await fetch(`${url}/v1/events?after=0&limit=1000`);
  const text = await res.text();
  const health = await fetch(`${url}/health`).then((r) => r.status);
  return { health, digest: text };
}

async function run(ctx: ScenarioContext): Promise<ScenarioBody> {
  const full = ctx.size === 'full';
  const httpRuns = full ? 20_000 : 2_000;
  const wsRuns = full ? 2_000 : 300;
  const path = join(ctx.dir, 'fuzz.db');
  const seedStore = await openSqliteStore({ path });
  try {
    await seedStore.append('invoice-1', [{ type: 'invoice.issued', data: { amount: 10, note: 'é💥' } }]);
    await seedStore.append('fuzz-2', [
      { type: 'x', data: [1, 2, 3] },
      { type: 'y', data: null },
    ]);
    await seedStore.append(ASTRAL_STREAM, [{ type: 'x', data: 'outside the BMP' }]);
    await (await seedStore.subscribe(FUZZ_CONSUMER, { from: 'start' })).close();
  } finally {
    await seedStore.close();
  }
  const runner = new ScriptRunner(ctx.dir);
  let server: ServerProcess | null = await startServerChild(runner, {
    store: { kind: 'sqlite', path },
    port: 0,
  });
  const body = emptyBody();
  const problems: string[] = [];
  const statuses = new Map<number, number>();
  try {
    const url = server.url;
    const rssBefore = rssMib(server.child.pid);
    const before = await snapshot(url);
    const requests = fc.sample(malformedRequest, { numRuns: httpRuns, seed: ctx.seed });
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < requests.length && server?.child.running) {
        const req: FuzzRequest = requests[next++]!;
        let status = 0;
        let text = '';
        try {
          const res = await fetch(url + req.url, {
            method: req.method,
            headers: req.headers,
            body: req.payload ?? null,
            signal: AbortSignal.timeout(30_000),
          });
          status = res.status;
          text = await res.text();
        } catch (err) {
          problems.push(`${req.method} ${req.url.slice(0, 80)}: ${(err as Error).message}`);
          continue;
        }
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        if (status >= 500)
          problems.push(`${req.method} ${req.url.slice(0, 80)} -> ${status} ${text.slice(0, 200)}`);
        else if (status >= 400) {
          let code: unknown;
          try {
            code = (JSON.parse(text) as { error?: { code?: unknown } }).error?.code;
          } catch {
            code = undefined;
          }
          if (typeof code !== 'string')
            problems.push(`${req.method} ${req.url.slice(0, 80)} -> ${status} without an error code`);
        } else if (req.method === 'POST')
          problems.push(`${req.method} ${req.url.slice(0, 80)} was accepted (${status})`);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    const frames = fc.sample(wsFrame, { numRuns: wsRuns, seed: ctx.seed + 1 });
    let wsErrors = 0;
    let wsCloses = 0;
    for (let i = 0; i < frames.length; i += 100) {
      const r = await wsBatch(url, frames.slice(i, i + 100));
      wsErrors += r.errors;
      wsCloses += r.closedEarly ? 1 : 0;
      problems.push(...r.problems);
    }
    const probes = await runStoreProbes(url, FUZZ_CONSUMER);
    problems.push(...probes.problems);
    if (!server.child.running) problems.push(`the server died: ${server.child.stderr.slice(-500)}`);
    const after = await snapshot(url);
    if (after.digest !== before.digest) problems.push('the store changed');
    if (after.health !== 200) problems.push(`health answered ${after.health}`);
    body.events = httpRuns + wsRuns;
    body.faults = `${httpRuns} HTTP requests + ${wsRuns} WS frames`;
    body.faultCount = httpRuns + wsRuns;
    body.notes.push(
      `HTTP statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`,
      `WS error replies ${wsErrors}, connections closed by the server ${wsCloses}`,
    );
    const fivexx = [...statuses].filter(([s]) => s >= 500).reduce((n, [, k]) => n + k, 0);
    body.notes.push(
      `5xx ${fivexx}`,
      `${probes.sent} limit probes (leases, batches, filters, control characters, release): ${probes.problems.length} wrong answers`,
      `server RSS ${rssBefore ?? '?'} MiB before, ${rssMib(server.child.pid) ?? '?'} MiB after`,
    );
    if (problems.length > 0) body.error = `${problems.length} problems: ${problems.slice(0, 3).join('; ')}`;
    return body;
  } finally {
    await server.child.kill();
    server = null;
  }
}

/** Sends frames on one connection, then a ping that must be answered; checks every reply is a protocol message. */
function wsBatch(
  url: string,
  frames: readonly string[],
): Promise<{ errors: number; closedEarly: boolean; problems: string[] }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/subscribe`);
    const problems: string[] = [];
    let errors = 0;
    let finished = false;
    const finish = (closedEarly: boolean): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      ws.terminate();
      resolve({ errors, closedEarly, problems });
    };
    const timer = setTimeout(() => {
      problems.push('no pong within 30 s after a batch of frames');
      finish(false);
    }, 30_000);
    ws.on('error', () => undefined);
    ws.on('close', () => finish(true));
    ws.on('message', (data: Buffer) => {
      let m: { type?: unknown; req?: unknown; error?: { code?: unknown } };
      try {
        m = JSON.parse(data.toString()) as typeof m;
      } catch {
        problems.push(`a non-JSON frame from the server: ${data.toString().slice(0, 100)}`);
        return;
      }
      if (typeof m.type !== 'string' || !SERVER_TYPES.has(m.type))
        problems.push(`an unknown server message: ${data.toString().slice(0, 100)}`);
      if (m.type === 'error') {
        errors++;
        if (typeof m.error?.code !== 'string')
          problems.push(`an error without a code: ${data.toString().slice(0, 100)}`);
        else if (m.error.code === 'internal')
          problems.push(`an internal error: ${data.toString().slice(0, 200)}`);
      }
      if (m.type === 'hello') {
        for (const f of frames) ws.send(f);
        ws.send(JSON.stringify({ type: 'ping', req: 'fuzz-final' }));
      }
      if (m.type === 'pong' && m.req === 'fuzz-final') finish(false);
    });
  });
}
