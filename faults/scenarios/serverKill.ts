/**
 * Scenario 2: the server process SIGKILLed while 8 HTTP appenders write. Every append that got a 2xx
 * must be there after the restart, each stream's versions contiguous and in the appender's order; an
 * append whose answer was lost is retried with the same event ids and is then either written once or
 * answered `duplicate`, never written twice.
 */
import { join } from 'node:path';
import { openPostgresStore } from '../../src/postgres/postgresStore.js';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import type { EventStore } from '../../src/core/eventStore.js';
import { createTempDatabase, type TempDatabase } from '../../test/support/postgres.js';
import type { ServerChildConfig } from '../children/serverChild.js';
import { ScriptRunner, delay, until } from '../processes.js';
import { randomUuid, type Random } from '../random.js';
import { startServerChild, type ServerProcess } from '../serverChildren.js';
import { readEvents, type Backend } from '../stores.js';
import { emptyBody, type Scenario, type ScenarioBody, type ScenarioContext } from '../types.js';

interface Request {
  stream: string;
  ids: string[];
}

interface AppenderState {
  acked: Request[];
  /** 200 answers with `duplicate: true`. */
  duplicates: number;
  /** Retries after a network failure (outcome unknown). */
  retries: number;
  /** Re-sent acknowledged appends that were written again instead of answered `duplicate`. */
  rewritten: number;
  /** Non-2xx answers that are not expected (5xx other than 503, 4xx). */
  unexpected: string[];
}

export function serverKillScenario(backend: Backend): Scenario {
  return {
    name: `server-sigkill-appends-${backend}`,
    proves: `every 2xx append survives a server SIGKILL amid 8 concurrent appenders; retries with the same ids never write twice (${backend} store)`,
    postgres: backend === 'postgres',
    run: (ctx) => run(ctx, backend),
  };
}

async function post(
  url: string,
  req: Request,
): Promise<{ status: number; body: { duplicate?: boolean; error?: { code?: string } } } | null> {
  try {
    const res = await fetch(`${url}/v1/streams/${encodeURIComponent(req.stream)}/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        events: req.ids.map((id, i) => ({ id, type: 'account.credited', data: { i } })),
      }),
      signal: AbortSignal.timeout(15_000),
    });
    return { status: res.status, body: (await res.json()) as { duplicate?: boolean } };
  } catch {
    return null; // connection refused/reset or timeout: the outcome is unknown
  }
}

async function appender(
  index: number,
  r: Random,
  server: () => string,
  stop: () => boolean,
): Promise<AppenderState> {
  const s: AppenderState = { acked: [], duplicates: 0, retries: 0, rewritten: 0, unexpected: [] };
  let resendLast = false;
  while (!stop()) {
    const req: Request =
      resendLast && s.acked.length > 0
        ? s.acked.at(-1)!
        : {
            stream: `acct-${index}-${r.int(0, 4)}`,
            ids: Array.from({ length: r.int(1, 3) }, () => randomUuid(r)),
          };
    const resend = resendLast;
    resendLast = false;
    for (;;) {
      const res = await post(server(), req);
      if (res === null || res.status === 503) {
        s.retries++;
        resendLast = false;
        await delay(25);
        continue;
      }
      if (res.status === 201 || res.status === 200) {
        if (res.body.duplicate === true) s.duplicates++;
        if (resend && res.body.duplicate !== true) s.rewritten++;
        if (!resend) s.acked.push(req);
        // After a failure, also re-send this acknowledged append once: it must come back `duplicate`.
        if (s.retries > 0 && r.chance(0.5)) resendLast = true;
      } else s.unexpected.push(`${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
      break;
    }
  }
  return s;
}

async function run(ctx: ScenarioContext, backend: Backend): Promise<ScenarioBody> {
  const full = ctx.size === 'full';
  const kills = full ? 10 : 2;
  const r = ctx.random;
  const runner = new ScriptRunner(ctx.dir);
  let database: TempDatabase | null = null;
  let storeConfig: ServerChildConfig['store'];
  if (backend === 'sqlite') storeConfig = { kind: 'sqlite', path: join(ctx.dir, 'server.db') };
  else {
    database = await createTempDatabase('idem_faults');
    storeConfig = { kind: 'postgres', url: database.connectionString };
  }
  let server: ServerProcess | null = null;
  const body = emptyBody();
  try {
    server = await startServerChild(runner, { store: storeConfig, port: 0 });
    const port = server.port;
    let url = server.url;
    let stopping = false;
    const appenders = Array.from({ length: 8 }, (_, i) =>
      appender(
        i,
        r.fork(`appender-${i}`),
        () => url,
        () => stopping,
      ),
    );
    for (let k = 0; k < kills; k++) {
      await delay(r.int(300, 1500));
      await server.child.kill();
      ctx.log(`SIGKILL ${k + 1}/${kills}`);
      server = await startServerChild(runner, { store: storeConfig, port });
      url = server.url;
    }
    // Let every appender get a few appends through the last server before stopping.
    const mark = Date.now();
    await until(() => Date.now() - mark > 500, 10_000, 'appends after the last restart');
    stopping = true;
    const states = await Promise.all(appenders);
    await server.child.kill();
    server = null;
    // Read back with the store itself, after the last kill.
    const store: EventStore =
      storeConfig.kind === 'sqlite'
        ? await openSqliteStore({ path: storeConfig.path })
        : await openPostgresStore({ connectionString: storeConfig.url, poolSize: 2 });
    try {
      const events = await readEvents(store);
      const byStream = new Map<string, string[]>();
      const seen = new Map<string, number>();
      let badVersions = 0;
      for (const e of events) {
        const list = byStream.get(e.stream) ?? [];
        list.push(e.id);
        byStream.set(e.stream, list);
        if (e.version !== list.length) badVersions++;
        seen.set(e.id, (seen.get(e.id) ?? 0) + 1);
      }
      const expectedIds = new Set<string>();
      let outOfOrder = badVersions;
      for (const st of states) {
        const perStream = new Map<string, string[]>();
        for (const req of st.acked) {
          perStream.set(req.stream, [...(perStream.get(req.stream) ?? []), ...req.ids]);
          for (const id of req.ids) expectedIds.add(id);
        }
        for (const [stream, ids] of perStream) {
          const stored = (byStream.get(stream) ?? []).filter((id) => expectedIds.has(id));
          const present = ids.filter((id) => seen.has(id));
          if (present.join() !== stored.join()) outOfOrder++;
        }
      }
      let lost = 0;
      for (const id of expectedIds) if (!seen.has(id)) lost++;
      let doubled = states.reduce((n, s) => n + s.rewritten, 0);
      // Every request is retried until answered, so every stored event belongs to an acknowledged append.
      for (const [id, n] of seen) doubled += expectedIds.has(id) ? n - 1 : n;
      body.events = expectedIds.size;
      body.delivered = events.length;
      body.duplicates = states.reduce((n, s) => n + s.duplicates, 0);
      body.lost = lost;
      body.doubled = doubled;
      body.outOfOrder = outOfOrder;
      body.faultCount = kills;
      body.faults = `${kills} server SIGKILL`;
      const retries = states.reduce((n, s) => n + s.retries, 0);
      const unexpected = states.flatMap((s) => s.unexpected);
      body.notes.push(
        `${states.reduce((n, s) => n + s.acked.length, 0)} acknowledged appends`,
        `${retries} retried requests`,
      );
      if (unexpected.length > 0) body.error = `unexpected answers: ${unexpected.slice(0, 3).join('; ')}`;
    } finally {
      await store.close();
    }
    return body;
  } finally {
    if (server) await server.child.kill();
    await database?.drop();
  }
}
