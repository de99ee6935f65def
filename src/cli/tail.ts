import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import { isIdemError } from '../core/errors.js';
import type { RecordedEvent } from '../core/event.js';
import type { EventStore } from '../core/eventStore.js';
import { matchesFilter, type EventFilter } from '../core/filter.js';
import type { CliContext } from './context.js';
import {
  describeTarget,
  withStore,
  withStoreOptions,
  type StoreFlags,
  type StoreTarget,
} from './openStore.js';
import { formatEvent, Output } from './output.js';
import { collect, filterFrom, parseFrom, parseInteger } from './parse.js';

interface TailFlags extends StoreFlags {
  consumer?: string;
  type?: string[];
  category?: string[];
  prefix?: string[];
  from?: string;
  interval?: string;
}

const HELP = `
Prints events as they commit, until Ctrl-C (SIGINT) or SIGTERM. With --json, one JSON event per line.

Without --consumer it reads the log from the head (or --from) and polls for new events; nothing is
recorded in the store. With --consumer NAME it subscribes as that durable consumer: it takes the
consumer's lease, resumes from its cursor (a new consumer starts at --from, default the head) and
acknowledges each batch after printing it. Without filter options, an existing consumer keeps its filter.

Examples:
  $ idem tail
  $ idem tail --type invoice.paid --from start
  $ idem tail --consumer audit_v1 --category invoice --json`;

export function registerTail(program: Command, ctx: CliContext): void {
  withStoreOptions(
    program
      .command('tail')
      .description('print events live as they commit (optionally as a durable consumer)')
      .option('--consumer <name>', 'subscribe and acknowledge as this durable consumer')
      .option('--type <type>', 'only this event type (repeatable)', collect)
      .option('--category <category>', 'only streams of this category (repeatable)', collect)
      .option('--prefix <prefix>', 'only streams starting with this prefix (repeatable)', collect)
      .option('--from <start>', 'where to start: start | end | a position (default: end)')
      .option('--interval <ms>', 'poll interval without --consumer (default 100)'),
  )
    .addHelpText('after', HELP)
    .action(async (flags: TailFlags) => {
      const out = new Output(ctx.io, flags.json === true);
      const from = parseFrom(flags.from) ?? 'end';
      const interval = parseInteger(flags.interval, '--interval', 1) ?? 100;
      const filter = filterFrom(flags);
      const hasFilter = Object.keys(filter).length > 0;
      const signal = ctx.stopSignal();
      await withStore(flags, ctx.env, async (store, target) => {
        if (flags.consumer === undefined)
          await pollTail(store, target, { filter, from, interval, signal, out, ctx });
        else await consumerTail(store, flags.consumer, hasFilter ? filter : null, { from, signal, out, ctx });
      });
    });
}

interface TailRun {
  from: 'start' | 'end' | number;
  signal: AbortSignal;
  out: Output;
  ctx: CliContext;
}

function print(out: Output, e: RecordedEvent, redelivery = false): void {
  if (out.json) out.data(redelivery ? { ...e, redelivery } : e);
  else out.line(formatEvent(e) + (redelivery ? '  (redelivery)' : ''));
}

async function pollTail(
  store: EventStore,
  target: StoreTarget,
  run: TailRun & { filter: EventFilter; interval: number },
): Promise<void> {
  const { out, signal } = run;
  let after = run.from === 'start' ? 0 : run.from === 'end' ? await store.headPosition() : run.from;
  run.ctx.io.stderr.write(
    `idem: tailing ${describeTarget(target)} after position ${after}; Ctrl-C to stop\n`,
  );
  while (!signal.aborted) {
    let n = 0;
    for await (const e of store.readAll({ after, filter: run.filter, limit: 500 })) {
      print(out, e);
      after = e.position;
      n++;
    }
    if (n < 500) {
      // Skip past events the filter does not want, so the next poll does not scan them again.
      if (n === 0 && Object.keys(run.filter).length > 0) after = await skipUnwanted(store, after, run.filter);
      await sleep(run.interval, undefined, { signal }).catch(() => undefined);
    }
  }
}

/**
 * The position just before the first event after `after` that the filter wants (or the last one read).
 * An event that matches stops the skip even if it committed after the filtered read missed it.
 */
async function skipUnwanted(store: EventStore, after: number, filter: EventFilter): Promise<number> {
  let last = after;
  for await (const e of store.readAll({ after, limit: 1000 })) {
    if (matchesFilter(filter, e)) break;
    last = e.position;
  }
  return last;
}

async function consumerTail(
  store: EventStore,
  name: string,
  filter: EventFilter | null,
  run: TailRun,
): Promise<void> {
  const { out, signal } = run;
  let effective = filter;
  if (effective === null) {
    try {
      effective = (await store.consumers.get(name)).filter;
    } catch (err) {
      if (!isIdemError(err, 'not_found')) throw err;
      effective = {};
    }
  }
  const sub = await store.subscribe(name, { filter: effective, from: run.from, signal });
  try {
    run.ctx.io.stderr.write(
      `idem: tailing as consumer "${name}" (epoch ${sub.epoch}) from position ${sub.startPosition}; Ctrl-C to stop\n`,
    );
    for await (const msg of sub) {
      if (msg.kind === 'caught_up') {
        out.note(`-- caught up at position ${msg.position}; waiting for new events`);
        continue;
      }
      if (msg.kind === 'paused') {
        out.note(
          msg.pause ? `-- consumer paused by ${msg.pause.by ?? msg.pause.reason}` : '-- consumer resumed',
        );
        continue;
      }
      for (const e of msg.events) print(out, e, msg.redelivery);
      const last = msg.events.at(-1);
      if (last) await sub.ack(last.position);
    }
  } finally {
    await sub.close();
  }
}
