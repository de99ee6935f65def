import type { Command } from 'commander';
import type { CliContext } from './context.js';
import { withStore, withStoreOptions, type StoreFlags } from './openStore.js';
import { formatEvent, JsonArrayWriter, Output } from './output.js';
import { collect, filterFrom, parseInteger } from './parse.js';

interface EventsFlags extends StoreFlags {
  after?: string;
  type?: string[];
  category?: string[];
  prefix?: string[];
  limit?: string;
}

const HELP = `
Prints events of all streams in global position order. Filters combine: an event matches when its
type is one of --type (if any) and its stream is in one of --category or starts with one of --prefix
(if any). With --json, a JSON array of events.

Examples:
  $ idem events
  $ idem events --after 100 --limit 50
  $ idem events --type invoice.issued --type invoice.paid --category invoice --json`;

export function registerEvents(program: Command, ctx: CliContext): void {
  withStoreOptions(
    program
      .command('events')
      .description('print events of all streams in position order')
      .option('--after <position>', 'only events after this global position (default 0)')
      .option('--type <type>', 'only this event type (repeatable)', collect)
      .option(
        '--category <category>',
        'only streams of this category, the part before the first "-" (repeatable)',
        collect,
      )
      .option('--prefix <prefix>', 'only streams starting with this prefix (repeatable)', collect)
      .option('--limit <n>', 'most events to print'),
  )
    .addHelpText('after', HELP)
    .action(async (flags: EventsFlags) => {
      const out = new Output(ctx.io, flags.json === true);
      const after = parseInteger(flags.after, '--after', 0);
      const limit = parseInteger(flags.limit, '--limit', 1);
      const filter = filterFrom(flags);
      await withStore(flags, ctx.env, async (store) => {
        const arr = out.json ? new JsonArrayWriter(ctx.io) : null;
        let n = 0;
        const opts = {
          filter,
          ...(after === undefined ? {} : { after }),
          ...(limit === undefined ? {} : { limit }),
        };
        for await (const e of store.readAll(opts)) {
          n++;
          if (arr) arr.push(e);
          else out.line(formatEvent(e));
        }
        arr?.end();
        if (n === 0) out.note('no events');
      });
    });
}
