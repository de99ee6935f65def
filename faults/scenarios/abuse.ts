/**
 * Scenario 9: an attacker with a weak token (or none) against server processes started with tokens
 * like `admin=...:admin;sub=...:subscribe` over a SQLite file, and one without tokens. Each probe is
 * an attack that once worked: a WebSocket client that floods requests with 1 MB keys and never reads,
 * slow bodies before authentication, too many connections, cross-site and DNS-rebinding requests, a
 * restricted token probing other tenants' names, and secrets printed by the CLI. The row reports the
 * server's RSS before and after.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import WebSocket from 'ws';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { rawConnection, send, unfinishedPost, upgradeStatus } from '../../test/server/rawHttp.js';
import { Child, ScriptRunner, until } from '../processes.js';
import { startServerChild, type ServerProcess } from '../serverChildren.js';
import { emptyBody, type Scenario, type ScenarioBody, type ScenarioContext } from '../types.js';

export const abuseScenario: Scenario = {
  name: 'abuse',
  proves:
    'floods, slow bodies, connection storms, cross-site requests, tenant probes and secret-bearing CLI input are refused or bounded; server RSS stays flat',
  run,
};

const TOKENS = 'admin=admin-secret:admin;sub=sub-secret:subscribe;inv=inv-secret:admin:invoice-';
const ADMIN = { authorization: 'Bearer admin-secret' };
const INV = { authorization: 'Bearer inv-secret' };
const MAX_CONNECTIONS = 64;
/** The RSS growth (MiB) beyond which the scenario fails: the unbounded buffers once added about 850. */
const MAX_RSS_GROWTH_MB = 200;

/** Resident set size of a process in MiB (Linux), or null where /proc is not there. */
function rssMb(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 1024) : null;
  } catch {
    return null;
  }
}

interface Probe {
  name: string;
  count: number;
}

async function run(ctx: ScenarioContext): Promise<ScenarioBody> {
  const full = ctx.size === 'full';
  const path = join(ctx.dir, 'abuse.db');
  const seed = await openSqliteStore({ path });
  const other = 'orders_projection_v1';
  try {
    await seed.append('invoice-1', [{ type: 'invoice.issued', data: { amount: 10 } }]);
    await seed.append('order-1', [
      { type: 'order.placed', data: {} },
      { type: 'order.paid', data: {} },
    ]);
    await (await seed.subscribe(other, { filter: { categories: ['order'] } })).close();
  } finally {
    await seed.close();
  }
  const runner = new ScriptRunner(ctx.dir);
  const body = emptyBody();
  const problems: string[] = [];
  const probes: Probe[] = [];
  const probe = (name: string, count: number): void => {
    probes.push({ name, count });
  };
  const server = await startServerChild(runner, {
    store: { kind: 'sqlite', path },
    port: 0,
    tokens: TOKENS,
    limits: { maxConnections: MAX_CONNECTIONS, requestTimeoutMs: 2000 },
  });
  let open: ServerProcess | null = null;
  try {
    const url = server.url;
    const head = await headOf(url);
    const rssBefore = rssMb(server.child.pid);

    // Item: replies buffered without limit. Requests with a 1 MB key from a client that never reads.
    const flood = await wsFlood(url, full ? 400 : 100, full ? 300_000 : 200_000);
    probe('WS flood', flood.sent);
    // 1006: the server closed with 1008 and, the close frame stuck behind unread data, dropped the
    // connection after silenceMs; either way it stopped buffering for the client.
    if (flood.closeCode !== 1008 && flood.closeCode !== 1006)
      problems.push(`the flooding WebSocket ended with ${flood.closeCode}, not 1008`);
    if (flood.replies >= flood.sent)
      problems.push('every flooding request was answered: nothing was bounded');
    if (flood.longestError > 2000) problems.push(`an error reply of ${flood.longestError} characters`);
    const rssAfterFlood = rssMb(server.child.pid);
    ctx.log(`flood done: close ${flood.closeCode}, ${flood.replies} replies`);

    // Slow bodies before authentication: each must be answered 401 and closed at once.
    const slow = full ? 300 : 60;
    let closed = 0;
    for (let i = 0; i < slow; i += 30) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(30, slow - i) }, () => slowUnauthenticated(url)),
      );
      closed += batch.filter(Boolean).length;
    }
    probe('slow bodies without a token', slow);
    if (closed !== slow)
      problems.push(`${slow - closed} of ${slow} slow unauthenticated bodies held their connection`);
    // An authenticated slow body ends with 408 after the request timeout.
    const timed = await unfinishedPost(url, 10_000, 'admin-secret');
    if (!/^HTTP\/1\.1 408 /.test(timed)) problems.push(`a slow body got ${timed.slice(0, 40)}`);
    probe('slow body with a token', 1);

    // A connection storm: past the cap, a 503 with the error body.
    const held = await Promise.all(Array.from({ length: MAX_CONNECTIONS }, () => rawConnection(url)));
    const refused = await send(url, 'GET', '/health');
    if (
      refused.status !== 503 ||
      (refused.json as { error?: { code?: string } })?.error?.code !== 'unavailable'
    )
      problems.push(`connection ${MAX_CONNECTIONS + 1} got ${refused.status}`);
    for (const c of held) c.socket.destroy();
    await until(async () => (await send(url, 'GET', '/health')).status === 200, 10_000, 'a free connection');
    probe('connections past the cap', 1);

    // A restricted token probes another tenant: the same 404 as a missing name; no owner or filter.
    const hidden = await send(url, 'GET', `/v1/consumers/${other}`, INV);
    const missing = await send(url, 'GET', '/v1/consumers/no_such_consumer_v1', INV);
    if (
      hidden.status !== 404 ||
      hidden.text.split(other).join('X') !== missing.text.split('no_such_consumer_v1').join('X')
    )
      problems.push(`a hidden consumer answered ${hidden.status} ${hidden.text.slice(0, 100)}`);
    const conflict = await wsConflict(url, other);
    if (conflict.includes('categories'))
      problems.push(`consumer_identity_conflict showed the filter: ${conflict}`);
    probe('tenant probes', 2);

    // Cross-site requests with tokens: a foreign Origin is refused even with a valid token.
    if ((await send(url, 'GET', '/v1/events', { ...ADMIN, origin: 'https://evil.example' })).status !== 403)
      problems.push('a foreign Origin with a token was served');
    probe('foreign origin with a token', 1);

    if (!server.child.running) problems.push(`the server died: ${server.child.stderr.slice(-500)}`);
    if ((await headOf(url)) !== head) problems.push('the store changed');
    const rssAfter = rssMb(server.child.pid);

    // Without tokens: DNS rebinding (Host) and cross-site pages (Origin) are refused.
    open = await startServerChild(runner, { store: { kind: 'sqlite', path }, port: 0 });
    let crossSite = 0;
    for (const headers of [
      { host: 'evil.example' },
      { origin: 'https://evil.example' },
      { origin: 'null' },
    ]) {
      const r = await send(
        open.url,
        'POST',
        '/v1/streams/invoice-1/events',
        {
          ...headers,
          'content-type': 'application/json',
        },
        JSON.stringify({ events: [{ type: 'x', data: 1 }] }),
      );
      if (r.status !== 403) problems.push(`without tokens, ${JSON.stringify(headers)} got ${r.status}`);
      if ((await upgradeStatus(open.url, headers)) !== 403)
        problems.push(`without tokens, a WebSocket with ${JSON.stringify(headers)} was not refused`);
      crossSite += 2;
    }
    probe('cross-site without tokens', crossSite);
    if ((await headOf(open.url)) !== head) problems.push('a cross-site request wrote');

    ctx.log('server probes done');
    // Secrets in CLI errors.
    const leaks = await cliLeaks(runner, join(ctx.dir, 'cli.db'));
    problems.push(...leaks.problems);
    probe('CLI secrets', leaks.count);

    const count = probes.reduce((n, p) => n + p.count, 0);
    const mb = (v: number | null): string => (v === null ? '?' : String(v));
    body.faults = `${count} probes; server RSS ${mb(rssBefore)} -> ${mb(rssAfterFlood)} (flood) -> ${mb(rssAfter)} MiB`;
    body.faultCount = count;
    body.events = 3;
    body.notes.push(
      probes.map((p) => `${p.name} ${p.count}`).join(', '),
      `flood: ${flood.sent} requests, ${flood.replies} replies read before close ${flood.closeCode}`,
    );
    if (rssBefore !== null && rssAfterFlood !== null && rssAfterFlood - rssBefore > MAX_RSS_GROWTH_MB)
      problems.push(`RSS grew by ${rssAfterFlood - rssBefore} MiB during the flood`);
    if (problems.length > 0) body.error = `${problems.length} problems: ${problems.slice(0, 3).join('; ')}`;
    return body;
  } finally {
    await server.child.kill();
    await open?.child.kill();
  }
}

async function headOf(url: string): Promise<number> {
  const r = await send(url, 'GET', '/v1/events?after=0&limit=1000', ADMIN);
  return (r.json as { head: number }).head;
}

/**
 * Sends `bigKeys` requests with a 1 MB unknown key, then `pings` small ones, without reading; then
 * reads what the server kept for it. A bounded server closes with 1008 long before the end.
 */
async function wsFlood(
  url: string,
  bigKeys: number,
  pings: number,
): Promise<{ sent: number; replies: number; longestError: number; closeCode: number }> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/subscribe`, {
    headers: { authorization: 'Bearer sub-secret' },
  });
  let replies = 0;
  let longestError = 0;
  let closeCode = 0;
  ws.on('message', (d: Buffer) => {
    replies++;
    if (d.toString('utf8', 0, 20).includes('"error"')) longestError = Math.max(longestError, d.length);
  });
  ws.on('error', () => undefined);
  const closed = new Promise<void>((resolve) =>
    ws.on('close', (code) => {
      closeCode = code;
      resolve();
    }),
  );
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  // The 1 MB keys first, read as they come: each error must quote only a short part of its key.
  // 1 MB: just under the server's 1 MiB message limit.
  const key = 'k'.repeat(1_000_000);
  for (let i = 0; i < bigKeys; i++) {
    ws.send(`{"type":"ping","req":${i},"${key}":1}`);
    // Let the frames drain before queueing more, so the client's own memory stays small.
    if (i % 20 === 19) await until(() => ws.bufferedAmount < 4 * 1024 * 1024, 60_000, 'the frames to leave');
  }
  await until(() => replies >= bigKeys || closeCode !== 0, 60_000, 'the replies to the 1 MB keys');
  // Then small requests without reading: far more replies than the kernel's buffers hold.
  ws.pause();
  const req = 'r'.repeat(100);
  for (let i = 0; i < pings; i++) ws.send(`{"type":"ping","req":"${req}"}`);
  await until(
    () => ws.bufferedAmount === 0 || ws.readyState !== WebSocket.OPEN,
    120_000,
    'the flood to be sent',
  );
  ws.resume();
  await Promise.race([closed, until(() => closeCode !== 0, 60_000, 'the flooding connection to close')]);
  return { sent: bigKeys + pings, replies, longestError, closeCode };
}

/** A POST announcing 10 MB without a token; true when the server answers 401 and closes at once. */
async function slowUnauthenticated(url: string): Promise<boolean> {
  try {
    return /^HTTP\/1\.1 401 /.test(await unfinishedPost(url, 10_000_000));
  } catch {
    return false;
  }
}

/** The error a restricted token gets for subscribing under a name registered with another tenant's filter. */
async function wsConflict(url: string, consumer: string): Promise<string> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/subscribe`, { headers: INV });
  ws.on('error', () => undefined);
  try {
    return await new Promise<string>((resolve) => {
      ws.on('message', (d: Buffer) => {
        const m = JSON.parse(d.toString()) as { type: string; req?: number };
        if (m.type === 'hello')
          ws.send(
            JSON.stringify({
              type: 'subscribe',
              sub: 's',
              consumer,
              filter: { streamPrefixes: ['invoice-'] },
              req: 1,
            }),
          );
        if (m.req === 1) resolve(d.toString());
      });
    });
  } finally {
    ws.terminate();
  }
}

/** Runs the real `idem` with secret-bearing input; counts the probes and reports any leak. */
async function cliLeaks(runner: ScriptRunner, db: string): Promise<{ count: number; problems: string[] }> {
  const secret = 'hunter2-abuse';
  const cases: [string[], Record<string, string>][] = [
    [['read', 'invoice-1', '--postgres', `postgres://:${secret}@127.0.0.1:1:2/db`, '--json'], {}],
    [['read', 'invoice-1', '--postgres', `host=127.0.0.1 port=1 password=${secret} dbname=db`], {}],
    [['serve', '--db', db, '--port', '0'], { IDEM_TOKENS: `[${secret}]` }],
    [
      ['serve', '--db', db, '--port', '0'],
      { IDEM_TOKENS: `[{"name":"a","token":"${secret}" "scopes":["admin"]}]` },
    ],
  ];
  const problems: string[] = [];
  for (const [args, env] of cases) {
    const child = new Child([...runner.command('cli'), ...args], { IDEM_TOKENS: '', ...env });
    let stdout = '';
    child.onLine((l) => (stdout += `${l}\n`));
    const exit = await child.exited;
    if (exit.code === 0) problems.push(`idem ${args[0]} succeeded with bad input`);
    if ((stdout + child.stderr).includes(secret))
      problems.push(`idem ${args.join(' ').slice(0, 60)} printed the secret`);
  }
  return { count: cases.length, problems };
}
