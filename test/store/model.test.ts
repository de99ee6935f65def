/**
 * Model-based test: random command sequences (appends with expected versions, repeated and
 * conflicting ids, concurrent groups, re-sent batches, reads) run against the SQLite store and the
 * in-memory reference store; every result, error code and read must be identical.
 * IDEM_FC_RUNS sets the number of runs (default 200, 40 in `npm run test:fast`); IDEM_FC_SEED replays a failing seed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { EventStore } from '../../src/core/eventStore.js';
import type { NewEvent, RecordedEvent } from '../../src/core/event.js';
import type { JsonValue } from '../../src/core/json.js';
import { createMemoryStore } from '../../src/memory/memoryStore.js';
import { openSqliteStore } from '../../src/sqlite/sqliteStore.js';
import { bySpeed } from '../support/fast.js';
import { tempDir } from '../support/tempDir.js';
import { modelCommands, type AppendCmd, type Cmd } from './modelCommands.js';

const RUNS = Number(process.env.IDEM_FC_RUNS ?? bySpeed(200, 40));
const SEED =
  process.env.IDEM_FC_SEED === undefined
    ? Date.now() ^ (Math.random() * 0x7fffffff)
    : Number(process.env.IDEM_FC_SEED);

type Outcome = { ok: unknown } | { error: string; details?: unknown };

/** Runs commands on one store; translates generated ids so that two stores' outputs compare. */
class Runner {
  /** Batches sent so far, for commands that re-send one. */
  readonly sent: { stream: string; events: NewEvent[] }[] = [];
  constructor(readonly store: EventStore) {}

  toEvents(cmd: AppendCmd): { stream: string; events: NewEvent[] } {
    if (cmd.replay !== undefined && this.sent.length > 0) {
      const old = this.sent[cmd.replay.index % this.sent.length]!;
      const events = structuredClone(old.events);
      if (cmd.replay.changeData && events[0]) events[0].data = { changed: true };
      return { stream: cmd.replay.otherStream ? cmd.stream : old.stream, events };
    }
    return { stream: cmd.stream, events: cmd.events.map((e) => structuredClone(e)) };
  }

  async append(cmd: AppendCmd): Promise<Outcome> {
    const { stream, events } = this.toEvents(cmd);
    this.sent.push({ stream, events });
    const options = cmd.expected === undefined ? {} : { expectedVersion: cmd.expected };
    return outcome(this.store.append(stream, events, options));
  }
}

async function outcome(p: Promise<unknown>): Promise<Outcome> {
  try {
    return { ok: await p };
  } catch (err) {
    const e = err as { code?: string; details?: Record<string, unknown>; message?: string };
    assert.ok(typeof e.code === 'string', `an error without a code: ${String(e.message)}`);
    // Wrong-version errors must agree on the facts; other codes on the code alone (their messages
    // may name whichever stored id was found first).
    if (e.code === 'wrong_expected_version') return { error: e.code, details: e.details };
    return { error: e.code };
  }
}

function strip(events: RecordedEvent[]): Omit<RecordedEvent, 'recordedAt'>[] {
  return events.map(({ recordedAt, ...rest }) => {
    assert.match(recordedAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    return rest;
  });
}

async function read(p: AsyncIterable<RecordedEvent>): Promise<Outcome> {
  try {
    const out: RecordedEvent[] = [];
    for await (const e of p) out.push(e);
    return { ok: strip(out) };
  } catch (err) {
    return { error: (err as { code?: string }).code ?? String(err) };
  }
}

/** Replaces the ids `b` generated with the ids `a` generated for the same events. */
class IdMap {
  private readonly map = new Map<string, string>();
  learn(a: Outcome, b: Outcome): void {
    if (!('ok' in a) || !('ok' in b)) return;
    const ra = a.ok as { ids?: string[] };
    const rb = b.ok as { ids?: string[] };
    ra.ids?.forEach((id, i) => {
      const other = rb.ids?.[i];
      if (other !== undefined && other !== id) this.map.set(other, id);
    });
  }
  translate(o: Outcome): Outcome {
    if (!('ok' in o)) return o;
    return {
      ok: JSON.parse(JSON.stringify(o.ok), (_k, v: JsonValue) =>
        typeof v === 'string' ? (this.map.get(v) ?? v) : v,
      ) as unknown,
    };
  }
}

async function step(cmd: Cmd, model: Runner, real: Runner, ids: IdMap): Promise<[Outcome, Outcome]> {
  switch (cmd.kind) {
    case 'append': {
      const a = await model.append(cmd);
      const b = await real.append(cmd);
      ids.learn(a, b);
      return [a, b];
    }
    case 'parallel': {
      // Same call order on both; the SQLite store commits them in one group transaction.
      const [as, bs] = await Promise.all([
        Promise.all(cmd.appends.map((c) => model.append(c))),
        Promise.all(cmd.appends.map((c) => real.append(c))),
      ]);
      as.forEach((a, i) => ids.learn(a, bs[i]!));
      return [{ ok: as }, { ok: bs }];
    }
    case 'readStream': {
      const o = {
        ...(cmd.fromVersion === undefined ? {} : { fromVersion: cmd.fromVersion }),
        ...(cmd.limit === undefined ? {} : { limit: cmd.limit }),
      };
      return [
        await read(model.store.readStream(cmd.stream, o)),
        await read(real.store.readStream(cmd.stream, o)),
      ];
    }
    case 'readAll': {
      const o = {
        ...(cmd.after === undefined ? {} : { after: cmd.after }),
        ...(cmd.limit === undefined ? {} : { limit: cmd.limit }),
        ...(cmd.filter === undefined ? {} : { filter: cmd.filter }),
      };
      return [await read(model.store.readAll(o)), await read(real.store.readAll(o))];
    }
    case 'head':
      return [{ ok: await model.store.headPosition() }, { ok: await real.store.headPosition() }];
    case 'version':
      return [
        { ok: await model.store.streamVersion(cmd.stream) },
        { ok: await real.store.streamVersion(cmd.stream) },
      ];
  }
}

describe('model-based: SQLite store against the memory model', () => {
  it(`random command sequences give identical results (${RUNS} runs, seed ${SEED})`, async () => {
    const dir = tempDir();
    let run = 0;
    let appends = 0;
    let failures = 0;
    try {
      await fc.assert(
        fc.asyncProperty(modelCommands(), async (cmds) => {
          const model = new Runner(createMemoryStore());
          const sqlite = await openSqliteStore({ path: dir.file(`run-${run++}.db`), durability: 'normal' });
          const real = new Runner(sqlite);
          const ids = new IdMap();
          try {
            for (const [i, cmd] of cmds.entries()) {
              const [a, b] = await step(cmd, model, real, ids);
              assert.deepEqual(
                ids.translate(b),
                a,
                `command ${i} ${JSON.stringify(cmd)}: SQLite differs from the model`,
              );
              if (cmd.kind === 'append' && 'ok' in a) appends++;
              else if (cmd.kind === 'append') failures++;
            }
            // Finally the whole log and every stream agree.
            const [all, allReal] = [await read(model.store.readAll()), await read(real.store.readAll())];
            assert.deepEqual(ids.translate(allReal), all, 'the final logs differ');
          } finally {
            await model.store.close();
            await sqlite.close();
          }
        }),
        { numRuns: RUNS, seed: SEED, endOnFailure: process.env.IDEM_FC_SHRINK === '0' },
      );
    } catch (err) {
      console.error(`# model test failed: replay with IDEM_FC_SEED=${SEED}`);
      throw err;
    } finally {
      await dir.cleanup();
    }
    console.log(
      `# model test: ${run} store files, ${appends} accepted and ${failures} refused single appends`,
    );
    assert.ok(appends > 0 && failures > 0, 'the commands exercised both accepted and refused appends');
  });
});
