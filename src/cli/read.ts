import type { Command } from 'commander';
import type { CliContext } from './context.js';
import { withStore, withStoreOptions, type StoreFlags } from './openStore.js';
import { formatEvent, JsonArrayWriter, Output } from './output.js';
import { parseAsOf, parseInteger } from './parse.js';

interface ReadFlags extends StoreFlags {
  fromVersion?: string;
  limit?: string;
  asOf?: string;
}

const HELP = `
Prints one stream's events in version order: #position stream@version type recordedAt data.
With --json, a JSON array of events. --as-of prints the stream as it was at a global position or
a time: its events up to the last one at or below the position, or recorded at or before the time.

Examples:
  $ idem read invoice-42
  $ idem read invoice-42 --from-version 3 --limit 10
  $ idem read invoice-42 --as-of 1200
  $ idem read invoice-42 --as-of 2026-03-01T12:00:00Z
  $ idem read invoice-42 --json | jq '.[].type'`;

export function registerRead(program: Command, ctx: CliContext): void {
  withStoreOptions(
    program
      .command('read')
      .description("print a stream's events")
      .argument('<stream>', 'the stream (entity), e.g. invoice-42')
      .option('--from-version <n>', 'first version to print (default 1)')
      .option('--limit <n>', 'most events to print')
      .option('--as-of <position|time>', 'the stream as it was at a global position or an ISO-8601 time'),
  )
    .addHelpText('after', HELP)
    .action(async (stream: string, flags: ReadFlags) => {
      const out = new Output(ctx.io, flags.json === true);
      const fromVersion = parseInteger(flags.fromVersion, '--from-version', 1);
      const limit = parseInteger(flags.limit, '--limit', 1);
      const asOf = parseAsOf(flags.asOf);
      await withStore(flags, ctx.env, async (store) => {
        const arr = out.json ? new JsonArrayWriter(ctx.io) : null;
        let n = 0;
        const opts = {
          ...(fromVersion === undefined ? {} : { fromVersion }),
          ...(limit === undefined ? {} : { limit }),
          ...asOf,
        };
        for await (const e of store.readStream(stream, opts)) {
          n++;
          if (arr) arr.push(e);
          else out.line(formatEvent(e));
        }
        arr?.end();
        if (n === 0)
          out.note(
            `no events in stream "${stream}"${fromVersion === undefined ? '' : ` from version ${fromVersion}`}` +
              (flags.asOf === undefined ? '' : ` as of ${flags.asOf}`),
          );
      });
    });
}
