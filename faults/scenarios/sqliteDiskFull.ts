/**
 * Scenario 6b: the SQLite store on a small filesystem (a 4 MiB tmpfs mounted for the run; without mount
 * rights, SQLite's max_page_count as the limit) that fills up. Appends must fail cleanly with
 * `storage_full` and write nothing, every acknowledged event must stay (also after a reopen), and
 * appends must work again once space is freed.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isIdemError } from '../../src/core/errors.js';
import type { NewEvent } from '../../src/core/event.js';
import { openSqliteStore, type SqliteEventStore } from '../../src/sqlite/sqliteStore.js';
import { randomUuid } from '../random.js';
import { readEvents } from '../stores.js';
import { emptyBody, type Scenario, type ScenarioBody, type ScenarioContext } from '../types.js';

export const sqliteDiskFullScenario: Scenario = {
  name: 'sqlite-disk-full',
  proves:
    'a full disk fails SQLite appends cleanly with storage_full, keeps every acknowledged event, and appends work again once space is freed',
  run,
};

async function run(ctx: ScenarioContext): Promise<ScenarioBody> {
  const r = ctx.random;
  const mnt = join(ctx.dir, 'small');
  mkdirSync(mnt);
  const mounted =
    process.platform === 'linux' &&
    spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', mnt]).status === 0;
  const ballast = join(mnt, 'ballast.bin');
  const path = join(mnt, 'store.db');
  const body = emptyBody();
  let store: SqliteEventStore | null = null;
  try {
    if (mounted) writeFileSync(ballast, Buffer.alloc(1024 * 1024, 1));
    store = await openSqliteStore({ path });
    if (!mounted) store.db.pragma('max_page_count = 600');
    const acked: string[] = [];
    let fullErrors = 0;
    let wroteOnFailure = 0;
    let failed: { stream: string; events: NewEvent[] } | null = null;
    const makeEvents = (): NewEvent[] =>
      Array.from({ length: r.int(1, 5) }, () => ({
        id: randomUuid(r),
        type: 'blob.stored',
        data: { pad: 'x'.repeat(r.int(500, 3000)) },
      }));
    for (let i = 0; i < 100_000 && fullErrors < 3; i++) {
      const stream = `blob-${r.int(1, 20)}`;
      const events: NewEvent[] = failed?.events ?? makeEvents();
      const target: string = failed?.stream ?? stream;
      const before = await store.streamVersion(target);
      try {
        await store.append(target, events);
        acked.push(...events.map((e) => e.id!));
        failed = null;
      } catch (err) {
        if (!isIdemError(err, 'storage_full')) throw err;
        fullErrors++;
        if ((await store.streamVersion(target)) !== before) wroteOnFailure++;
        failed = { stream: target, events };
      }
    }
    if (fullErrors === 0) throw new Error('the filesystem never filled up');
    const whileFull = await readEvents(store);
    // Free space, then the append that failed must go through (written now, not a duplicate).
    if (mounted) rmSync(ballast);
    else store.db.pragma('max_page_count = 1000000');
    let recovered = false;
    if (failed) {
      const res = await store.append(failed.stream, failed.events);
      acked.push(...failed.events.map((e) => e.id!));
      recovered = !res.duplicate;
    }
    const more = makeEvents();
    await store.append('blob-after', more);
    acked.push(...more.map((e) => e.id!));
    await store.close();
    store = await openSqliteStore({ path });
    const events = await readEvents(store);
    const ids = new Map<string, number>();
    for (const e of events) ids.set(e.id, (ids.get(e.id) ?? 0) + 1);
    const perStream = new Map<string, number>();
    let outOfOrder = 0;
    for (const e of events) {
      const v = (perStream.get(e.stream) ?? 0) + 1;
      perStream.set(e.stream, v);
      if (e.version !== v) outOfOrder++;
    }
    body.events = acked.length;
    body.delivered = events.length;
    body.lost = acked.filter((id) => !ids.has(id)).length;
    const ackedSet = new Set(acked);
    body.doubled =
      [...ids.values()].reduce((n, k) => n + k - 1, 0) +
      [...ids.keys()].filter((id) => !ackedSet.has(id)).length;
    body.outOfOrder = outOfOrder;
    body.faultCount = fullErrors;
    body.faults = `${fullErrors} storage_full (${mounted ? '4 MiB tmpfs' : 'max_page_count 600, mount refused'})`;
    body.notes.push(
      `${whileFull.length} events readable while full`,
      recovered
        ? 'appends work again after freeing space'
        : 'the failed append did not go through after freeing space',
    );
    const problems: string[] = [];
    if (wroteOnFailure > 0) problems.push(`${wroteOnFailure} failed appends changed the stream`);
    if (!recovered) problems.push('no recovery after freeing space');
    if (problems.length > 0) body.error = problems.join('; ');
    return body;
  } finally {
    await store?.close();
    if (mounted) spawnSync('umount', ['-l', mnt]);
  }
}
