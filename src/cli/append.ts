import type { Command } from 'commander';
import { InvalidInputError } from '../core/errors.js';
import type { NewEvent } from '../core/event.js';
import { parseExpectedVersion } from '../core/expectedVersion.js';
import type { CliContext } from './context.js';
import { creatingStore, withStore, withStoreOptions, type StoreFlags } from './openStore.js';
import { Output, plural } from './output.js';
import { parseJson, parseJsonObject } from './parse.js';

interface AppendFlags extends StoreFlags {
  type: string;
  data: string;
  id?: string;
  metadata?: string;
  expectedVersion?: string;
}

const HELP = `
Appends one event. Appending the same --id again with the same content writes nothing
and exits 0 ("duplicate: nothing written"); the same id with other content is a conflict.

Examples:
  $ idem append invoice-42 --type invoice.issued --data '{"amount":100}'
  $ idem append invoice-42 --type invoice.paid --data '{"amount":100}' \\
      --id 0190a6c2-8e1f-7c3a-9b2d-3f4e5a6b7c8d --expected-version 1
  $ idem append order-7 --type order.placed --data '{}' --metadata '{"commandId":"c-1"}' --json

Exit codes: 0 written or duplicate, 2 invalid input, 3 wrong expected version or id conflict.`;

/** Store field names as the user typed them on the command line. */
const FLAG_FOR_FIELD: Record<string, string> = {
  stream: '<stream>',
  'events[0].id': '--id',
  'events[0].type': '--type',
  'events[0].data': '--data',
  'events[0].metadata': '--metadata',
  'events[0]': '--data/--metadata',
};

export function registerAppend(program: Command, ctx: CliContext): void {
  withStoreOptions(
    program
      .command('append')
      .description('append an event to a stream')
      .argument('<stream>', 'the stream (entity), e.g. invoice-42')
      .requiredOption('--type <type>', 'event type, e.g. invoice.issued')
      .requiredOption('--data <json>', 'event data as JSON')
      .option('--id <uuid>', 'event id (a UUID); makes retries idempotent (default: a new UUIDv7)')
      .option('--metadata <json>', 'event metadata as a JSON object (commandId, correlationId, ...)')
      .option('--expected-version <v>', 'any | no_stream | stream_exists | a version number (0 = empty)'),
  )
    .addHelpText('after', HELP)
    .action(async (stream: string, flags: AppendFlags) => {
      const out = new Output(ctx.io, flags.json === true);
      const event: NewEvent = { type: flags.type, data: parseJson(flags.data, '--data') };
      if (flags.id !== undefined) event.id = flags.id;
      if (flags.metadata !== undefined) event.metadata = parseJsonObject(flags.metadata, '--metadata');
      const expectedVersion = parseExpectedVersion(flags.expectedVersion, '--expected-version');
      const result = await withStore(
        flags,
        ctx.env,
        async (store) => {
          try {
            return await store.append(stream, [event], { expectedVersion });
          } catch (err) {
            throw renameField(err);
          }
        },
        creatingStore(ctx.io),
      );
      out.data(result);
      if (result.duplicate) {
        out.line(
          `duplicate: nothing written (${result.stream} is at version ${result.version}; ` +
            `the original append is at position ${result.lastPosition})`,
        );
      } else {
        const n = result.lastPosition - result.firstPosition + 1;
        out.line(
          `appended ${plural(n, 'event')} to ${result.stream}: version ${result.version}, ` +
            `position ${result.lastPosition}, id ${result.ids.join(', ')}`,
        );
      }
    });
}

function renameField(err: unknown): unknown {
  if (!(err instanceof InvalidInputError)) return err;
  const flag = FLAG_FOR_FIELD[err.field];
  if (flag === undefined) return err;
  return new InvalidInputError(flag, String(err.details.rule));
}
