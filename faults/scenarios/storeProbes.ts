/**
 * Probes of the limits on subscriptions, filters and leases, sent to a server by `bad-input-fuzz`:
 * each names the input and the answer it must get. Expected answers are documented in
 * docs/protocol.md ("Limits on subscriptions, filters and leases").
 */
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';

/** A stream of the seeded store whose name lies outside the Basic Multilingual Plane. */
export const ASTRAL_STREAM = '💥-1';

const many = (n: number): string[] => Array.from({ length: n }, (_, i) => `t${i}`);

/** [what, subscribe options]: every one must be refused with `invalid_input`, registering nothing. */
const WS_PROBES: [string, Record<string, unknown>][] = [
  ['leaseTtlMs 8.9e15 (a lease until the year 284056)', { leaseTtlMs: 8.9e15 }],
  ['leaseTtlMs 6.5e9 (past setInterval)', { leaseTtlMs: 6.5e9 }],
  ['leaseTtlMs 10', { leaseTtlMs: 10 }],
  ['batchSize and maxInFlight 1e9', { batchSize: 1e9, maxInFlight: 1e9 }],
  ['a filter of 40,000 types', { filter: { types: many(40_000) } }],
  ['a NUL in a filter type', { filter: { types: ['a\u0000b'] } }],
  ['a lone surrogate in a stream prefix', { filter: { streamPrefixes: ['x\ud83d'] } }],
];

/** [method, path, body, expected status]. */
function httpProbes(consumer: string): [string, string, string | undefined, number][] {
  return [
    ['GET', '/v1/events?types=a%00b', undefined, 400],
    ['GET', '/v1/events?categories=x%01', undefined, 400],
    ['GET', '/v1/events?streamPrefixes=%00', undefined, 400],
    ['GET', `/v1/events?types=${many(257).join('&types=')}`, undefined, 400],
    ['GET', '/v1/streams/a%00b/events', undefined, 400],
    ['POST', `/v1/consumers/${consumer}/dead-letters/retry`, JSON.stringify({ id: 'a\u0000b' }), 400],
    ['POST', '/v1/streams/fuzz-2/events', '{"events":[{"type":"order.\\ud83d","data":1}]}', 400],
    ['POST', '/v1/streams/fuzz-2/events', JSON.stringify({ events: [{ type: 'a\u0000', data: 1 }] }), 400],
    ['POST', `/v1/consumers/${consumer}/release`, undefined, 200],
    ['GET', '/v1/consumers', undefined, 200],
    ['GET', '/metrics', undefined, 200],
  ];
}

/** The resident set size of a process in MiB (Linux `/proc`); null where that is not readable. */
export function rssMib(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 1024) : null;
  } catch {
    return null;
  }
}

/** Sends every probe; returns how many were sent and a line per answer that was not the expected one. */
export async function runStoreProbes(
  url: string,
  consumer: string,
): Promise<{ sent: number; problems: string[] }> {
  const problems: string[] = [];
  let sent = 0;
  for (const [method, path, body, expected] of httpProbes(consumer)) {
    sent++;
    const res = await fetch(url + path, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body ?? null,
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    if (res.status !== expected)
      problems.push(
        `${method} ${path.slice(0, 60)} -> ${res.status} (want ${expected}) ${text.slice(0, 120)}`,
      );
  }
  for (const [path, count] of [
    [`/v1/events?streamPrefixes=${encodeURIComponent(ASTRAL_STREAM.slice(0, 2))}`, 1],
    [`/v1/events?categories=${encodeURIComponent(ASTRAL_STREAM.split('-')[0]!)}`, 1],
  ] as const) {
    sent++;
    const body = (await (await fetch(url + path)).json()) as { events?: unknown[] };
    if (body.events?.length !== count)
      problems.push(`GET ${path} found ${body.events?.length ?? 'no'} events (want ${count})`);
  }
  problems.push(...(await wsProbes(url)));
  return { sent: sent + WS_PROBES.length, problems };
}

/** Each subscribe probe on one connection; every reply must be an `invalid_input` error. */
function wsProbes(url: string): Promise<string[]> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/subscribe`);
    const problems: string[] = [];
    const replies = new Map<number, string>();
    const timer = setTimeout(() => finish(['no reply to every subscribe probe within 30 s']), 30_000);
    function finish(more: string[] = []): void {
      clearTimeout(timer);
      ws.terminate();
      resolve([...problems, ...more]);
    }
    ws.on('error', (err) => finish([`WebSocket error: ${err.message}`]));
    ws.on('message', (data: Buffer) => {
      const m = JSON.parse(data.toString()) as { type: string; req?: number; error?: { code?: string } };
      if (m.type === 'hello') {
        WS_PROBES.forEach(([, options], i) =>
          ws.send(
            JSON.stringify({
              type: 'subscribe',
              sub: `p${i}`,
              consumer: `probe_${i}_v1`,
              req: i,
              ...options,
            }),
          ),
        );
        return;
      }
      if (typeof m.req !== 'number' || (m.type !== 'error' && m.type !== 'subscribed')) return;
      replies.set(m.req, m.type === 'error' ? (m.error?.code ?? '?') : 'subscribed');
      if (replies.size < WS_PROBES.length) return;
      for (const [i, [what]] of WS_PROBES.entries()) {
        if (replies.get(i) !== 'invalid_input') problems.push(`subscribe with ${what}: ${replies.get(i)}`);
      }
      finish();
    });
  });
}
